package notify

// ErrClosed is errClosed, for the external tests.
var ErrClosed = errClosed

// ErrDropped is errDropped, for the external tests.
var ErrDropped = errDropped

// ParseFormat is parseFormat, for the external tests.
var ParseFormat = parseFormat
