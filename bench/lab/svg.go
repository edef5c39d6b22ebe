package main

import (
	"fmt"
	"html"
	"strings"
)

// Chart geometry, in SVG user units.
const (
	chartW, chartH         = 760, 340
	plotL, plotT           = 50, 36
	plotW, plotH           = 560, 260
	chartSmoothing         = 5 // seconds: each line is the trailing mean over this
	chartMaxUtil   float64 = 1 // the y axis: utilization 0 to 1
)

// palette colours the backends (cycled beyond its length).
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
	"#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#e7969c"}

// chart is an SVG of r's utilization per backend over time (trailing means
// over chartSmoothing seconds), the final window shaded, and the figures
// in the title (with its run of o.runs).
func chart(r result, bs []*backend, o options) string {
	secs := 0
	if len(r.util) > 0 {
		secs = len(r.util[0])
	}
	x := func(s float64) float64 { return plotL + s/float64(max(1, secs))*plotW }
	y := func(u float64) float64 { return plotT + plotH - min(u, chartMaxUtil)/chartMaxUtil*plotH }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", chartW, chartH)
	conv := "not converged"
	if r.fig.Converge >= 0 {
		conv = fmt.Sprintf("converged at %.0f s", r.fig.Converge)
	}
	label := r.policy.label(o.backends)
	if o.runs > 1 {
		label += fmt.Sprintf(" (run %d of %d)", r.run+1, o.runs)
	}
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="13" font-weight="bold">%s: max/mean %.3f (simulator %.3f), %s, %d errors</text>`+"\n",
		plotL, html.EscapeString(label), r.fig.MaxMean, r.simMaxMean, conv, r.errors)
	fx := x(float64(secs) - o.final.Seconds())
	fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#f0f0f0"/>`+"\n", fx, plotT, x(float64(secs))-fx, plotH)
	for _, u := range []float64{0, 0.25, 0.5, 0.75, 1} {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%.2f</text>`+"\n",
			plotL, y(u), plotL+plotW, y(u), plotL-4, y(u)+4, u)
	}
	step := max(10, secs/8/10*10)
	for s := 0; s <= secs; s += step {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%d s</text>`+"\n", x(float64(s)), plotT+plotH+14, s)
	}
	fmt.Fprintf(&b, `<text x="12" y="%d" transform="rotate(-90 12 %d)" text-anchor="middle">utilization (ORCA, %d s mean)</text>`+"\n",
		plotT+plotH/2, plotT+plotH/2, chartSmoothing)
	for j, u := range r.util {
		color := palette[j%len(palette)]
		var pts []string
		for s := range u {
			m := means([][]float64{u}, s-chartSmoothing+1, s+1)[0]
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(s)+0.5), y(m)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.3" points="%s"/>`+"\n", color, strings.Join(pts, " "))
		if j < len(bs) {
			ly := plotT + 6 + j*14
			fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/><text x="%d" y="%d">%s (%.0f/s)</text>`+"\n",
				plotL+plotW+12, ly, plotL+plotW+28, ly, color, plotL+plotW+32, ly+4, bs[j].id, bs[j].capacity)
		}
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#444"/>`+"\n", plotL, plotT, plotW, plotH)
	b.WriteString("</svg>\n")
	return b.String()
}
