package main

import "github.com/xds-server/xds-server/bench/section"

// sectionName names this simulator's section of BENCHMARKS.md; bench/report
// keeps it when it rewrites the file.
const sectionName = "weightsim"

var beginMarker, endMarker = section.Markers(sectionName)

// replaceSection returns doc with this simulator's section replaced.
func replaceSection(doc, body string) (string, error) { return section.Replace(doc, sectionName, body) }
