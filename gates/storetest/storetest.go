// Package storetest checks that a store implementation keeps the contracts of package gates.
//
// It checks an implementation of the store interfaces of package gates for
// all-or-nothing token consumption, exactly one winner among concurrent
// callers, limits that hold, atomic approval updates. Run it from the
// implementation's tests:
//
//	func TestReplayStore(t *testing.T) {
//		storetest.TestReplayStore(t, func(t *testing.T) token.ReplayStore {
//			return mystore.NewReplayStore(...)
//		})
//	}
//
// Each subtest asks for a new, empty store. A few subtests wait for a short
// expiry to pass; they poll for the outcome instead of assuming a duration.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/axgate/axgate/gates"
)

// Concurrency is the number of goroutines the concurrency subtests start.
var Concurrency = 100

// eventually polls cond until it holds, failing the test after 10 seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: did not happen within 10s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// race runs f n times at once (released together) and returns the errors.
func race(n int, f func(i int) error) []error {
	errs := make([]error, n)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Go(func() {
			start.Wait()
			errs[i] = f(i)
		})
	}
	start.Done()
	done.Wait()
	return errs
}

// count tallies errors: nil, those matching target, and the others (returned
// joined for the failure message).
// errQuota, as count's target, matches a *gates.QuotaError.
var errQuota = errors.New("quota")

// isQuota reports whether err is a store's refusal over a quota.
func isQuota(err error) bool {
	var qe *gates.QuotaError
	return errors.As(err, &qe)
}

func count(errs []error, target error) (ok, matched int, other error) {
	var others []error
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case target == errQuota && isQuota(err), target != nil && errors.Is(err, target):
			matched++
		default:
			others = append(others, err)
		}
	}
	if len(others) > 0 {
		other = fmt.Errorf("%d unexpected errors, first: %w", len(others), others[0])
	}
	return ok, matched, other
}

func ctx(t *testing.T) context.Context { return t.Context() }
