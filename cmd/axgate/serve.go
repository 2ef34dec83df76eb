package main

import "context"

func runServe(_ context.Context, e *env, args []string) int { return exitUsage }
