package llm

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"time"

	"github.com/hpcq/hpcq/internal/textcut"
)

// ProbeResult is what one tiny request taught about the endpoint.
type ProbeResult struct {
	What     string // "text" or "image"
	Accepted bool
	Err      error
	Latency  time.Duration
	Response Response
	// Streamed: the reply came as a stream (false after the endpoint
	// refused one).
	Streamed bool
}

// String is the result on one line.
func (r ProbeResult) String() string {
	if !r.Accepted {
		return fmt.Sprintf("%s: refused after %s: %v", r.What, r.Latency.Round(time.Millisecond), r.Err)
	}
	resp := r.Response
	mode := "streamed"
	if !r.Streamed {
		mode = "whole (not streamed)"
	}
	usage := "usage reported"
	if resp.UsageEstimated {
		usage = "no usage reported: tokens estimated"
	}
	s := fmt.Sprintf("%s: accepted in %s, %s; model %q answered %q (finish %s; %d tokens in, %d cached; %d out, %d reasoning; %s)",
		r.What, r.Latency.Round(time.Millisecond), mode, resp.Model, textcut.Head(resp.Content, 40), resp.FinishReason,
		resp.TokensIn, resp.CachedTokens, resp.TokensOut, resp.ReasoningTokens, usage)
	if resp.Note != "" {
		s += "; " + resp.Note
	}
	return s
}

// Probe sends one tiny request (and with vision, one tiny image) as the
// run would send them (its model, limit and effort) and says what the
// endpoint made of each: `scheduler check --probe`.
func (c *OpenAI) Probe(ctx context.Context, req Request, vision bool) []ProbeResult {
	req.Messages = []Message{{Role: "user", Content: "Reply with the single word: ok"}}
	req.Purpose = "probe"
	probe := func(what string, req Request) ProbeResult {
		start := time.Now()
		resp, err := c.Chat(ctx, req)
		return ProbeResult{What: what, Accepted: err == nil, Err: err, Latency: time.Since(start), Response: resp, Streamed: c.Streaming()}
	}
	out := []ProbeResult{probe("text", req)}
	if !vision {
		return out
	}
	if !out[0].Accepted {
		return append(out, ProbeResult{What: "image", Err: fmt.Errorf("not sent: the text request was refused")})
	}
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for i := range 8 {
		img.Set(i, i, color.RGBA{R: 200, A: 255})
	}
	var b bytes.Buffer
	_ = png.Encode(&b, img)
	req.Messages = []Message{{Role: "user", Content: "What color is the line in this image? One word.", Images: []Image{{MIME: "image/png", Data: b.Bytes()}}}}
	return append(out, probe("image", req))
}
