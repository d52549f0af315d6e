// Package reference holds the figures symmem ships for machines it was measured on
// (docs/results: two and four H200s on NVLink), the short key sweep that measures the
// same rows on another machine, and the judgement of such a sweep against them: each
// row more than a tolerance below its figure is named with what usually causes it.
// check-nvshmem --perf runs the sweep and prints the judgement; Judge itself takes a
// bench result and a Table, so that it can be tested on figures made up for the test.
package reference
