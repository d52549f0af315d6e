// Package report prints results for people (tables) and for programs (JSON, CSV).
//
// A table's layout is decided here and drawn by github.com/olekukonko/tablewriter, the
// table library of symmem's design: report leaves optional columns out until a table
// fits 120 columns (or COLUMNS where it says less), narrows the widest columns and cuts
// or wraps their cells, measures text as a terminal shows it (go-runewidth: a wide
// character takes two columns, a combining mark none), and fixes a streamed table's
// widths when it starts; tablewriter is then handed cells already split into lines,
// trimmed and cut, and fixed column widths, and draws the boxes, the plain columns, the
// centred header and the aligned rows (grid.go says how its trimming, its dropping of
// blank lines and its reading of escape sequences are kept from acting).
//
// tablewriter is v1.0.9, not the newest v1.1: every process links this package, each
// rank of a job included, and v1.1's package init builds an 8192-entry width cache. In a
// bare `symmem help` (GODEBUG=inittrace=1), v1.1.5's packages took 0.19 ms and 740 KB of
// init, v1.0.9's 0.05 ms and 76 KB. v0.0.5 (0.03 ms, 22 KB) draws every junction with one
// character, so it cannot draw the box's corners, and it has no streaming.
package report
