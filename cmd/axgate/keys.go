package main

import "context"

func runKeys(_ context.Context, e *env, args []string) int { return exitUsage }
func runToken(_ context.Context, e *env, args []string) int { return exitUsage }
