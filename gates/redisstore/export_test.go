package redisstore

// SweepStep is sweepStep, for the tests.
const SweepStep = sweepStep
