// Package recent is a small keep-the-last-N memo, safe for concurrent
// use: the strategies and the monitoring tunings a pass resolved, so the
// next steady pass does not render or decode them again.
package recent

import "sync"

// Cache keeps the values of the last few keys put, dropping the oldest
// key first. The zero value is ready to use.
type Cache[K comparable, V any] struct {
	mu      sync.Mutex
	entries map[K]V
	order   []K
}

// Get returns the value of k, or the zero value.
func (c *Cache[K, V]) Get(k K) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[k]
}

// Put stores v under k and drops the oldest keys beyond keep.
func (c *Cache[K, V]) Put(k K, v V, keep int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[K]V{}
	}
	if _, ok := c.entries[k]; !ok {
		c.order = append(c.order, k)
	}
	c.entries[k] = v
	for len(c.order) > keep {
		delete(c.entries, c.order[0])
		c.order = c.order[1:]
	}
}
