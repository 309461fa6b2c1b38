// Package archtest holds the tests that keep the code base's shape: each
// concept named in one place, and functions small enough to read.
package archtest
