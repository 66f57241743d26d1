package recent

import "testing"

func TestRecentKeepsTheLastKeys(t *testing.T) {
	var c Cache[string, int]
	c.Put("a", 1, 2)
	c.Put("b", 2, 2)
	c.Put("a", 10, 2) // an update does not make a key newer
	if got := c.Get("a"); got != 10 {
		t.Fatalf("a = %d, want 10", got)
	}
	c.Put("c", 3, 2)
	if got := c.Get("a"); got != 0 {
		t.Errorf("a = %d after a third key, want dropped", got)
	}
	if c.Get("b") != 2 || c.Get("c") != 3 {
		t.Errorf("b, c = %d, %d, want 2, 3", c.Get("b"), c.Get("c"))
	}
}
