package llm

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/hpcq/hpcq/internal/textcut"
)

// ErrConfig: the endpoint refused the run's configuration (its key, its
// model, a parameter of every request): no request can succeed until it is
// fixed, so the run stops, resumable, at the first one. It wraps the
// endpoint's own error (*openai.APIError or *openai.RequestError).
var ErrConfig = errors.New("llm: the endpoint refused the configuration")

// ConfigError is an ErrConfig: the status, the endpoint's message and the
// parameter it names.
type ConfigError struct {
	Status  int
	Code    string
	Param   string
	Message string
	Err     error
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the endpoint refused the configuration (status %d", e.Status)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Param != "" {
		b.WriteString(", parameter " + e.Param)
	}
	b.WriteString(")")
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// Is makes a ConfigError an ErrConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

// Unwrap is the endpoint's error.
func (e *ConfigError) Unwrap() error { return e.Err }

// endpointError is an error answer of the endpoint (go-openai's
// *openai.APIError or *openai.RequestError, which errors.As finds through
// it), said on one line of valid UTF-8: status, type and code, parameter,
// message (cut to maxErrorChars).
type endpointError struct {
	err error
	msg string
	// kind is what the answer says beyond its status: ErrFiltered for
	// a prompt a content filter refused.
	kind error
}

func (e *endpointError) Error() string { return e.msg }
func (e *endpointError) Unwrap() error { return e.err }

func (e *endpointError) Is(target error) bool { return e.kind != nil && target == e.kind }

// describe makes an endpoint's error answer an *endpointError; other
// errors are returned as they are.
func describe(err error) error {
	status, code, typ, param, msg, ok := apiFields(err)
	if !ok {
		return err
	}
	var b strings.Builder
	if status == 0 {
		b.WriteString("an error in the stream")
	} else {
		fmt.Fprintf(&b, "status %d %s", status, http.StatusText(status))
	}
	if kind := strings.TrimSpace(typ + " " + code); kind != "" {
		b.WriteString(" (" + kind + ")")
	}
	if param != "" {
		b.WriteString(", parameter " + param)
	}
	if msg != "" {
		b.WriteString(": " + msg)
	}
	if code == FinishContentFilter {
		// Azure OpenAI's answer to a prompt its filter refuses: 400,
		// code content_filter, the categories in innererror.
		cats := "the endpoint named no category"
		var apiErr *openai.APIError
		if errors.As(err, &apiErr) && apiErr.InnerError != nil {
			cats = cmp.Or(filterCategories(apiErr.InnerError.ContentFilterResults), cats)
		}
		return &endpointError{err: err, msg: fmt.Sprintf("%v: the prompt (%s); %s", ErrFiltered, cats, b.String()), kind: ErrFiltered}
	}
	return &endpointError{err: err, msg: b.String()}
}

// configParams are the request's settings: a 400 naming one is the
// configuration's fault, not this request's.
var configParams = map[string]bool{"model": true, "max_tokens": true, "max_completion_tokens": true, "temperature": true, "top_p": true,
	"reasoning_effort": true, "response_format": true, "stream": true, "stream_options": true, "api-version": true}

// configCodes are the error codes of a refused configuration (OpenAI,
// Azure, vLLM, Ollama).
var configCodes = map[string]bool{"unsupported_parameter": true, "unsupported_value": true, "model_not_found": true,
	"invalid_api_key": true, "DeploymentNotFound": true, "OperationNotSupported": true, "unsupported_country_region_territory": true,
	"invalid_organization": true, "insufficient_quota": true}

// apiFields are the status, code, type, parameter and message of an
// endpoint's error answer; ok is false for other errors.
func apiFields(err error) (status int, code, typ, param, msg string, ok bool) {
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		if apiErr.Param != nil {
			param = *apiErr.Param
		}
		// go-openai reads a null code as the number 0.
		if apiErr.Code != nil && apiErr.Code != 0 {
			code = fmt.Sprint(apiErr.Code)
		}
		return apiErr.HTTPStatusCode, cutMessage(code), cutMessage(apiErr.Type), cutMessage(param), cutMessage(apiErr.Message), true
	}
	var reqErr *openai.RequestError
	if errors.As(err, &reqErr) {
		// A body go-openai does not read as an error: the fields at its
		// top level (vLLM before 0.9: {"object": "error", "message", ...}),
		// else its start.
		var top struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    any     `json:"code"`
		}
		if json.Unmarshal(reqErr.Body, &top) != nil || top.Message == "" {
			return reqErr.HTTPStatusCode, "", "", "", textcut.OneLine(string(reqErr.Body[:min(len(reqErr.Body), maxBodyExcerpt)]), 160), true
		}
		if top.Param != nil {
			param = *top.Param
		}
		if top.Code != nil {
			code = fmt.Sprint(top.Code)
		}
		return reqErr.HTTPStatusCode, cutMessage(code), cutMessage(top.Type), cutMessage(param), cutMessage(top.Message), true
	}
	return 0, "", "", "", "", false
}

// configPhrases begin the message of a 400 that refuses a parameter where
// the server names no code or parameter (vLLM, proxies): OpenAI's own
// wording, which they copy.
var configPhrases = []string{"unsupported parameter", "unsupported value", "unrecognized request argument"}

// asConfigError is err as a *ConfigError when it refuses the
// configuration: 401, 403 and 404 (a key, an account, a model or
// deployment), a 400 whose code or parameter is one of the request's
// settings or whose message says it refuses a parameter, 429
// insufficient_quota (no credit: waiting does not help), and go-openai's
// own checks of a reasoning model's request; nil for any other error (a
// request too long for the context, or whose content is refused, is that
// request's fault: a rule that took any first 400 for the configuration
// would stop a resumed run for good on a request it must send again).
func asConfigError(err error) *ConfigError {
	if errors.Is(err, openai.ErrReasoningModelMaxTokensDeprecated) || errors.Is(err, openai.ErrReasoningModelLimitationsOther) ||
		errors.Is(err, openai.ErrReasoningSamplingUnsupported) || errors.Is(err, openai.ErrReasoningEffortUnsupported) {
		return &ConfigError{Status: http.StatusBadRequest, Message: "go-openai refused it before sending: " + err.Error(), Err: err}
	}
	status, code, _, param, msg, ok := apiFields(err)
	if !ok {
		return nil
	}
	refused := false
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		refused = true
	case http.StatusBadRequest:
		refused = configCodes[code] || configParams[param] || slices.ContainsFunc(configPhrases, func(p string) bool {
			return strings.HasPrefix(strings.ToLower(msg), p)
		})
	case http.StatusTooManyRequests:
		refused = code == "insufficient_quota"
	}
	if !refused {
		return nil
	}
	return &ConfigError{Status: status, Code: code, Param: param, Message: msg, Err: err}
}

// streamRefused: a 400 that refuses streaming (a model or an unverified
// organization), answered by asking again without a stream.
func streamRefused(err error) bool {
	status, _, _, param, msg, ok := apiFields(err)
	return ok && status == http.StatusBadRequest && (param == "stream" || param == "stream_options" ||
		strings.Contains(strings.ToLower(msg), "stream"))
}

// retryable tells whether an attempt's error is worth another attempt:
// 408, 409, 429 and 5xx answers, timeouts between chunks, connection errors
// and streams cut short, answers that are not a chat completion or have
// no choices.
func retryable(err error) bool {
	if errors.Is(err, errReplyTooLarge) || errors.Is(err, errAttemptCap) || errors.Is(err, ErrConfig) {
		return false
	}
	if status, code, _, _, _, ok := apiFields(err); ok {
		// Status 0: an error event in the middle of a stream, as a reset.
		return status == 0 || status == http.StatusRequestTimeout || status == http.StatusConflict ||
			status == http.StatusTooManyRequests && code != "insufficient_quota" || status >= 500
	}
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) || errors.Is(err, errEmptyReply) ||
		errors.Is(err, errNotCompletion) || errors.Is(err, errStreamCut) || errors.Is(err, errIdle) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, openai.ErrTooManyEmptyStreamMessages) ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "EOF")
}

// Errors of one attempt.
var (
	errEmptyReply = errors.New("llm: the endpoint answered no choices")
	// errNotCompletion: the endpoint answered something that is not a chat
	// completion (an HTML page, garbage), as a proxy or captive portal may.
	errNotCompletion = errors.New("llm: the endpoint's answer is not a chat completion")
	// errReplyTooLarge: the endpoint's answer is over maxReplyBytes.
	errReplyTooLarge = fmt.Errorf("llm: the endpoint's answer is over %d MiB", maxReplyBytes>>20)
	// errStreamCut: a stream ended before its reply did (no finish_reason).
	errStreamCut = errors.New("llm: the stream ended before the reply did")
	// errIdle: no chunk within the idle timeout.
	errIdle = errors.New("llm: the endpoint sent nothing within the idle timeout")
	// errAttemptCap: an attempt reached its total cap (not retried: the
	// next would cost as much).
	errAttemptCap = errors.New("llm: the attempt reached its time cap")
)

// maxErrorChars bounds what an error answer's fields carry into an error
// (and the logs): an endpoint may say much more than a reason.
const maxErrorChars = 1000

// cutMessage is s, valid UTF-8, cut to maxErrorChars with "..." after a cut.
func cutMessage(s string) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) <= maxErrorChars {
		return s
	}
	return s[:textcut.Floor(s, maxErrorChars)] + "..."
}

// parseRetryAfter reads seconds or an HTTP date; 0 when absent or bad.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// maxBodyExcerpt bounds what of an answer's body is read for an error's
// one-line excerpt.
const maxBodyExcerpt = 1024
