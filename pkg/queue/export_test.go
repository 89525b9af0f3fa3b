package queue

// StopResultsConsumer stops the consumer under a results watch, as a
// consumer that stops pulling after a failover does.
func (w *Watch) StopResultsConsumer() {
	w.resultsMu.Lock()
	defer w.resultsMu.Unlock()
	w.results.Stop()
}
