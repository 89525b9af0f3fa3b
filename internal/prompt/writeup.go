package prompt

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/hpcq/hpcq/pkg/llm"
)

// The writeup's prompts: the paper written around a run's facts, and the
// review of its rendered pages by a model that reads images. They are not
// node prompts (no memory update; the final memory export is their notes).
const (
	Writeup       Kind = "writeup"
	WriteupReview Kind = "writeup_review"
)

// Paper is what a writeup prompt is built from.
type Paper struct {
	Idea string
	// Facts lists the ids a paper may state, with their values and what
	// they are.
	Facts string
	// Path is the path of the search to its best node.
	Path string
	// Setup says what the nodes ran with: toolchains and their versions,
	// hosts.
	Setup string
	// Figures lists the figures' paths in the paper's directory, with the
	// node each comes from and what the vision model saw in it.
	Figures string
	// Bibliography lists the keys the paper may cite, with their titles.
	Bibliography string
	// Notes is the run's final memory export.
	Notes string
	// Draft is the previous round's paper, and Feedback what the checks,
	// the compile or the review found in it.
	Draft    string
	Feedback string
}

// WriteupMessages are the messages asking for a paper (purpose writeup).
func WriteupMessages(p Paper) ([]llm.Message, error) {
	if strings.TrimSpace(p.Facts) == "" {
		return nil, fmt.Errorf("%w: a writeup prompt needs Facts", ErrPrompt)
	}
	intro, err := fixed("intro_", Writeup, false)
	if err != nil {
		return nil, err
	}
	draft := ""
	if strings.TrimSpace(p.Draft) != "" {
		draft = "```latex\n" + strings.TrimSpace(p.Draft) + "\n```"
	}
	secs := []section{{"Introduction", intro}, {"Research idea", p.Idea}, {"Facts", p.Facts}, {"Path to the best node", p.Path}, {"Setup", p.Setup}, {"Figures", p.Figures},
		{"Bibliography", p.Bibliography}, {"Notes", p.Notes}, {"Previous draft", draft}, {"Feedback", p.Feedback}}
	return []llm.Message{{Role: "system", Content: defaultSystem}, {Role: "user", Content: sections(secs, "")}}, nil
}

// WriteupReviewMessages ask a vision model to review a paper's rendered
// pages (purpose writeup_review); the pages go as the user message's images.
func WriteupReviewMessages(tex string, pages []llm.Image) ([]llm.Message, error) {
	if strings.TrimSpace(tex) == "" || len(pages) == 0 {
		return nil, fmt.Errorf("%w: a writeup review needs the paper and its pages", ErrPrompt)
	}
	intro, err := fixed("intro_", WriteupReview, false)
	if err != nil {
		return nil, err
	}
	secs := []section{{"Introduction", intro}, {"Pages", fmt.Sprintf("%d pages, attached as images 1 to %d.", len(pages), len(pages))},
		{"Paper", "```latex\n" + strings.TrimSpace(tex) + "\n```"}}
	return []llm.Message{{Role: "system", Content: defaultSystem}, {Role: "user", Content: sections(secs, ""), Images: pages}}, nil
}

// MaxPaperBytes bounds a paper's LaTeX: a paper of 20 pages is about 60 KB.
const MaxPaperBytes = 256 << 10

var latexFenceRe = regexp.MustCompile("(?s)```[ \t]*(?:latex|tex)?[ \t]*\r?\n(.*?)\r?\n[ \t]*```")

// ParsePaper reads a paper from a writeup reply: the fenced block that holds
// \documentclass (else the reply itself), from \documentclass to the last
// \end{document}. A reply without a whole document, or over MaxPaperBytes,
// is refused with the reason (the next attempt's feedback).
func ParsePaper(reply string) (string, error) {
	text := reply
	for _, m := range latexFenceRe.FindAllStringSubmatch(reply, -1) {
		if strings.Contains(m[1], `\documentclass`) {
			text = m[1]
			break
		}
	}
	start := strings.Index(text, `\documentclass`)
	end := strings.LastIndex(text, `\end{document}`)
	switch {
	case start < 0:
		return "", errors.New(`no \documentclass: answer with the whole paper in one latex block`)
	case end < start || !strings.Contains(text[start:end], `\begin{document}`):
		return "", errors.New(`the paper is not whole: it needs \begin{document} and \end{document}`)
	}
	tex := text[start : end+len(`\end{document}`)]
	if len(tex) > MaxPaperBytes {
		return "", fmt.Errorf("the paper is %d bytes, at most %d", len(tex), MaxPaperBytes)
	}
	return strings.ToValidUTF8(tex, "?") + "\n", nil
}

// MaxFindings bounds the review's findings, and MaxFindingBytes each one.
const (
	MaxFindings     = 20
	MaxFindingBytes = 1000
)

// ParsePageReview reads the findings of a writeup review: {"findings": [...]},
// blank ones left out, at most MaxFindings of at most MaxFindingBytes.
func ParsePageReview(payload string) ([]string, error) {
	var v struct {
		Findings *[]string `json:"findings"`
	}
	dec := json.NewDecoder(strings.NewReader(llm.StripFence(payload)))
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf(`prompt: the review is not {"findings": ["..."]}: %w`, err)
	}
	if dec.More() {
		return nil, errors.New("prompt: the review: data after the JSON object")
	}
	if v.Findings == nil {
		return nil, errors.New(`prompt: the review has no "findings" list`)
	}
	var out []string
	for _, f := range *v.Findings {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if len(out) == MaxFindings {
			break
		}
		if len(f) > MaxFindingBytes {
			f = strings.ToValidUTF8(f[:MaxFindingBytes], "") + "..."
		}
		out = append(out, f)
	}
	return out, nil
}
