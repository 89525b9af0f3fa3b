// Package llm is hpcq's client for language models: a Client interface and
// its backends. OpenAI talks to any OpenAI-compatible endpoint (OpenAI,
// vLLM, Ollama, llama.cpp server) with bounded retries on 429, 5xx,
// timeouts and dropped connections (exponential backoff with jitter, a
// server's Retry-After wins), a per-attempt timeout and a concurrency
// limit. Replay serves recorded replies from a JSONL cassette for offline
// runs and deterministic tests, and never invents one; Recorder records a
// cassette from a live client (HPCQ_LLM_RECORD). Metered wraps any client:
// it writes every call to the llm_calls table, prices it, and stops new
// requests once the run's budget is spent.
package llm
