// Package section rewrites one marked section of a Markdown file, leaving
// the rest byte for byte: the simulators (bench/subsetsim, bench/weightsim)
// each own a section of BENCHMARKS.md, delimited by the lines
// "<!-- NAME:begin -->" and "<!-- NAME:end -->", which bench/report keeps
// when it rewrites the file. It imports nothing from this module.
package section
