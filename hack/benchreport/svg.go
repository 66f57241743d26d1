package main

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"slices"
)

// Plot geometry, in SVG user units.
const (
	width, height          = 720.0, 360.0
	left, right, top, bott = 70.0, 20.0, 40.0, 50.0
)

// mark is a labelled vertical line on a line chart (a phase of the run).
type mark struct {
	x     float64
	label string
}

// niceMax rounds v up to 1, 2 or 5 times a power of ten.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func axes(b *bytes.Buffer, title, xLabel, yLabel string, xMax, yMax float64) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(b, `<text x="%g" y="22" font-size="15" text-anchor="middle">%s</text>`+"\n", width/2, html.EscapeString(title))
	x0, y0, x1, y1 := left, height-bott, width-right, top
	fmt.Fprintf(b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/><line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`+"\n", x0, y0, x1, y0, x0, y0, x0, y1)
	for i := 0; i <= 5; i++ {
		v := yMax * float64(i) / 5
		y := y0 - (y0-y1)*float64(i)/5
		fmt.Fprintf(b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#ddd"/><text x="%g" y="%g" text-anchor="end">%s</text>`+"\n", x0, y, x1, y, x0-6, y+4, num(v))
		if xMax > 0 {
			xv := xMax * float64(i) / 5
			x := x0 + (x1-x0)*float64(i)/5
			fmt.Fprintf(b, `<text x="%g" y="%g" text-anchor="middle">%s</text>`+"\n", x, y0+16, num(xv))
		}
	}
	fmt.Fprintf(b, `<text x="%g" y="%g" text-anchor="middle">%s</text>`+"\n", (x0+x1)/2, height-12, html.EscapeString(xLabel))
	fmt.Fprintf(b, `<text x="16" y="%g" text-anchor="middle" transform="rotate(-90 16 %g)">%s</text>`+"\n", (y0+y1)/2, (y0+y1)/2, html.EscapeString(yLabel))
}

// lineChart plots ys against xs (points joined, each marked when there are
// few) with the marks as labelled vertical lines.
func lineChart(title, xLabel, yLabel string, xs, ys []float64, marks []mark) []byte {
	var b bytes.Buffer
	xMax, yMax := niceMax(slices.Max(xs)), niceMax(slices.Max(ys)*1.05)
	axes(&b, title, xLabel, yLabel, xMax, yMax)
	px := func(x float64) float64 { return left + (width-left-right)*x/xMax }
	py := func(y float64) float64 { return height - bott - (height-bott-top)*y/yMax }
	for i, m := range marks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#aaa" stroke-dasharray="3,3"/>`+"\n", px(m.x), height-bott, px(m.x), top)
		fmt.Fprintf(&b, `<text x="%.1f" y="%g" font-size="10" fill="#555">%s</text>`+"\n", px(m.x)+3, top+12+float64(i%4)*12, html.EscapeString(m.label))
	}
	b.WriteString(`<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="`)
	for i := range xs {
		fmt.Fprintf(&b, "%.1f,%.1f ", px(xs[i]), py(ys[i]))
	}
	b.WriteString("\"/>\n")
	if len(xs) <= 20 {
		for i := range xs {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="#1f77b4"/><text x="%.1f" y="%.1f" font-size="11">%s</text>`+"\n", px(xs[i]), py(ys[i]), px(xs[i])+5, py(ys[i])-6, num(ys[i]))
		}
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// barChart draws, per label, upstream's and virtop's bars side by side.
func barChart(title string, labels []string, upstream, virtop []float64) []byte {
	var b bytes.Buffer
	yMax := niceMax(max(slices.Max(upstream), slices.Max(virtop)) * 1.05)
	axes(&b, title, "", "virtop / upstream", 0, yMax)
	slot := (width - left - right) / float64(len(labels))
	bar := slot * 0.3
	py := func(y float64) float64 { return height - bott - (height-bott-top)*y/yMax }
	for i, l := range labels {
		x := left + slot*float64(i) + slot*0.15
		for j, v := range []float64{upstream[i], virtop[i]} {
			color := []string{"#999", "#1f77b4"}[j]
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x+float64(j)*bar, py(v), bar, height-bott-py(v), color)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" text-anchor="middle">%s</text>`+"\n", x+float64(j)*bar+bar/2, py(v)-3, num(v))
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%g" font-size="9" text-anchor="middle">%s</text>`+"\n", x+bar, height-bott+14, html.EscapeString(shorten(l, 28)))
	}
	fmt.Fprintf(&b, `<rect x="%g" y="30" width="10" height="10" fill="#999"/><text x="%g" y="39">upstream</text><rect x="%g" y="30" width="10" height="10" fill="#1f77b4"/><text x="%g" y="39">virtop</text>`+"\n",
		width-right-160, width-right-146, width-right-80, width-right-66)
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
