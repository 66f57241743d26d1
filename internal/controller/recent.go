package controller

import "sync"

// recent keeps the values of the last few keys put, dropping the oldest
// key first. The zero value is ready to use.
type recent[K comparable, V any] struct {
	mu      sync.Mutex
	entries map[K]V
	order   []K
}

// get returns the value of k, or the zero value.
func (c *recent[K, V]) get(k K) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[k]
}

// put stores v under k and drops the oldest keys beyond keep.
func (c *recent[K, V]) put(k K, v V, keep int) {
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
