// Package docexamples holds a test, and only a test, that keeps the
// documentation true: every command README.md and docs/*.md show after a
// `$ ` prompt in a fenced block is run, and what it prints is compared
// with what the document shows.
//
// A command on committed files (`audit pcap`, `audit h2`, optionally after
// `cd DIR &&`) is run from the repository's root, its standard output and
// error together, and its lines must be the document's, where a line
// `...` stands for any number of lines. `$ echo $?` shows the exit status
// of the command before it. A command that needs a live port, a server or
// a client (`audit server`, `client`, `live`, `watch`) is a transcript of a
// run that cannot be remade offline: it is checked for its flags (the
// command with --help must parse), not for its output.
//
// `go test -v ./internal/docexamples` names every example and what was
// checked.
package docexamples
