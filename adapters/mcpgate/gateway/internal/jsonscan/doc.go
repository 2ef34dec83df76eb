// Package jsonscan reads JSON-RPC messages without decoding them.
//
// It finds the members of an object and the elements of an array, each
// value as its bytes, so that a message is read once and its values are
// passed on as they were written; and it writes a response around an
// encoded result.
//
// It is used on data that json.Valid accepted; on any other data it returns
// false or stops early, and never panics (FuzzMembers). A key with an escape
// or that is not UTF-8 makes Members return false: a caller leaves such a
// message to a full decoder, so that a key has one spelling.
package jsonscan
