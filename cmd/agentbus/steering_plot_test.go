package main

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// plotSteering writes a PNG of the steering latency against live sessions
// (rows without history) and against history (rows at the most sessions),
// each beside the same run's skeleton of the pipeline (see skeleton) and
// Redis and JetStream round trips.
func plotSteering(path string, rows []steeringRow) error {
	var bySessions, byHistory []steeringRow
	most := 0
	for _, r := range rows {
		most = max(most, r.sessions)
	}
	for _, r := range rows {
		if r.held {
			continue
		}
		if r.history == 0 {
			bySessions = append(bySessions, r)
		}
		if r.sessions == most {
			byHistory = append(byHistory, r)
		}
	}
	left, err := steeringPlot("by live sessions", "live sessions", bySessions, func(r steeringRow) float64 { return float64(r.sessions) })
	if err != nil {
		return err
	}
	right, err := steeringPlot(fmt.Sprintf("by history (%d live sessions)", most), "messages held per session", byHistory,
		func(r steeringRow) float64 { return float64(r.history) })
	if err != nil {
		return err
	}
	img := vgimg.New(vg.Points(1100), vg.Points(420))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 6, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	plots := [][]*plot.Plot{{left, right}}
	canvases := plot.Align(plots, tiles, dc)
	left.Draw(canvases[0][0])
	right.Draw(canvases[0][1])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func steeringPlot(title, xLabel string, rows []steeringRow, x func(steeringRow) float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "POST Immediate → sidecar command stream, " + title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = "milliseconds"
	p.Legend.Top = true
	blue, orange := color.RGBA{R: 31, G: 119, B: 180, A: 255}, color.RGBA{R: 255, G: 127, B: 14, A: 255}
	// The skeleton's lines are dashed in the colour of the same quantile of
	// ours, dotted when it also confirms each message as ours does.
	dashed, dotted := []vg.Length{vg.Points(4), vg.Points(3)}, []vg.Length{vg.Points(1), vg.Points(2)}
	series := []struct {
		name   string
		value  func(steeringRow) float64
		color  color.RGBA
		dashes []vg.Length
	}{
		{"p50", func(r steeringRow) float64 { return r.p50 }, blue, nil},
		{"p99", func(r steeringRow) float64 { return r.p99 }, orange, nil},
		{"max", func(r steeringRow) float64 { return r.max }, color.RGBA{R: 214, G: 39, B: 40, A: 255}, nil},
		{"skeleton p50", func(r steeringRow) float64 { return r.skel50 }, blue, dashed},
		{"skeleton p99", func(r steeringRow) float64 { return r.skel99 }, orange, dashed},
		{"skeleton+confirm p50", func(r steeringRow) float64 { return r.skelC50 }, blue, dotted},
		{"skeleton+confirm p99", func(r steeringRow) float64 { return r.skelC99 }, orange, dotted},
		{"Redis XADD→XREAD p99", func(r steeringRow) float64 { return r.redis99 }, color.RGBA{R: 127, G: 127, B: 127, A: 255}, nil},
		{"JetStream publish→ack p99", func(r steeringRow) float64 { return r.js99 }, color.RGBA{R: 44, G: 160, B: 44, A: 255}, nil},
	}
	for _, s := range series {
		pts := make(plotter.XYs, len(rows))
		for i, r := range rows {
			pts[i] = plotter.XY{X: x(r), Y: s.value(r)}
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, err
		}
		line.Color, points.Color, line.Dashes = s.color, s.color, s.dashes
		p.Add(line, points)
		p.Legend.Add(s.name, line, points)
	}
	return p, nil
}
