package slack

// maxUsed is the most the budget ever held at once.
func (b *byteBudget) maxUsed() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}
