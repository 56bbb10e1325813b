package postgres

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/gatehousehq/gatehouse/graph"
)

// A state split for storage and joined again is the same JSON value, for
// states with large fields anywhere among small ones.
func TestSplitJoinState(t *testing.T) {
	big := strings.Repeat(`ab"c\d}`, blobMin)
	states := []map[string]any{
		{},
		{"a": 1},
		{"doc": big},
		{"a": 1, "doc": big, "z": []any{"x", big}, "m": map[string]any{"k": big}, "s": "small"},
		{"k\"ey": big, "é": big + "2"},
	}
	for _, st := range states {
		raw, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		inline, blobs := splitState(raw)
		if len(inline) >= blobMin {
			t.Errorf("inline part is %d bytes", len(inline))
		}
		refs, err := refsJSON(blobs)
		if err != nil {
			t.Fatal(err)
		}
		var keys, vals []string
		for _, b := range blobs {
			keys, vals = append(keys, b.key), append(vals, string(b.val))
		}
		joined, err := joinState(inline, refs, keys, vals)
		if err != nil {
			t.Fatal(err)
		}
		var got, want map[string]any
		if err := json.Unmarshal(joined, &got); err != nil {
			t.Fatalf("%s: %v", joined, err)
		}
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("joined state differs:\n got %.200s\nwant %.200s", joined, raw)
		}
	}
	// a missing blob is an error naming the field
	if _, err := joinState([]byte(`{"a":1}`), []byte(`{"doc":"00"}`), nil, nil); err == nil || !strings.Contains(err.Error(), "doc") {
		t.Errorf("missing blob: %v", err)
	}
	// inline wins over a blob of the same field (rows written whole)
	joined, err := joinState([]byte(`{"doc":"inline"}`), []byte(`{"doc":"00"}`), []string{"doc"}, []string{`"blob"`})
	if err != nil || !bytes.Equal(joined, []byte(`{"doc":"inline"}`)) {
		t.Errorf("inline and blob: %s %v", joined, err)
	}
}

func TestBlobCacheIsPerFence(t *testing.T) {
	var c blobCache
	b := blob{key: "doc", val: []byte(`"x"`)}
	c.put("t", 3, []blob{b})
	if _, ok := c.known("t", 3, "doc", []byte(`"x"`)); !ok {
		t.Error("same fence, same bytes: not known")
	}
	if _, ok := c.known("t", 3, "doc", []byte(`"y"`)); ok {
		t.Error("other bytes known")
	}
	if _, ok := c.known("t", 4, "doc", []byte(`"x"`)); ok {
		t.Error("other fence known")
	}
	c.forget("t")
	if _, ok := c.known("t", 3, "doc", []byte(`"x"`)); ok {
		t.Error("forgotten task known")
	}
}

// The cache hands back the values it holds by hash whatever the fence, and
// keeps within its byte bound.
func TestBlobCacheValuesAndBound(t *testing.T) {
	var c blobCache
	big := blob{key: "doc", val: bytes.Repeat([]byte("x"), blobCacheBytes/3)}
	big.hash[0] = 1
	c.put("a", 1, []blob{big})
	if held, h := c.held("a"); len(held) != 1 || &held[0].val[0] != &big.val[0] || len(h) != 1 || !bytes.Equal(h[0], big.hash[:]) {
		t.Errorf("held %d values, hashes %x", len(held), h)
	}
	if held, h := c.held("b"); len(held) != 0 || h == nil {
		t.Errorf("held %d values of another task, hashes %x", len(held), h)
	}
	if _, ok := c.known("a", 1, "doc", bytes.Clone(big.val)); !ok {
		t.Error("equal bytes in another slice: not known")
	}
	c.put("b", 1, []blob{big})
	c.put("c", 1, []blob{big})
	c.put("d", 1, []blob{big})
	if c.size > blobCacheBytes || len(c.tasks) != 3 {
		t.Errorf("%d bytes in %d tasks", c.size, len(c.tasks))
	}
	if held, _ := c.held("d"); len(held) != 1 {
		t.Error("the last put was evicted")
	}
	// (which of a, b, c went is up to the map's order)
	c.put("d", 2, nil)
	if c.size != 2*len(big.val) || len(c.tasks) != 2 {
		t.Errorf("%d bytes in %d tasks after an empty put", c.size, len(c.tasks))
	}
	for _, id := range []string{"a", "b", "c"} {
		c.forget(id)
	}
	if c.size != 0 || len(c.tasks) != 0 {
		t.Errorf("%d bytes in %d tasks after forgetting them all", c.size, len(c.tasks))
	}
}

// A commit sends a large field only when the store does not know it to be
// stored under the commit's fence: fields given apart and fields inside the
// state alike, recognised by identity or by their bytes.
func TestPrepareStateSendsOnlyWhatIsNotStored(t *testing.T) {
	s := &Store{core: &core{}}
	doc := []byte(`"` + strings.Repeat("a", 3*blobMin) + `"`)
	fields := []graph.StateField{{Key: "doc", JSON: doc}}
	inline, refs, put, all, err := s.prepareState("t", 1, []byte(`{"n":1}`), fields)
	if err != nil || len(put) != 1 || len(all) != 1 || string(inline) != `{"n":1}` || !strings.Contains(string(refs), `"doc"`) {
		t.Fatalf("first commit: inline %s refs %s, %d to put (%v)", inline, refs, len(put), err)
	}
	s.blobs.put("t", 1, all)
	// the same slice, then equal bytes elsewhere, then inside the state
	for i, st := range [][]byte{[]byte(`{"n":2}`), []byte(`{"n":3}`), []byte(`{"n":4,"doc":` + string(doc) + `}`)} {
		f := fields
		switch i {
		case 1:
			f = []graph.StateField{{Key: "doc", JSON: bytes.Clone(doc)}}
		case 2:
			f = nil
		}
		inline, refs2, put, all2, err := s.prepareState("t", 1, st, f)
		if err != nil || len(put) != 0 || len(all2) != 1 || !bytes.Equal(refs2, refs) || bytes.Contains(inline, []byte("doc")) {
			t.Errorf("commit %d: %d to put, refs %s, inline %.40s (%v)", i, len(put), refs2, inline, err)
		}
		if i == 0 && &all2[0].val[0] != &doc[0] {
			t.Error("the cached slice was not kept")
		}
	}
	// another fence: the blob may be gone (the task ended and was pruned)
	if _, _, put, _, _ := s.prepareState("t", 2, []byte(`{"n":5}`), fields); len(put) != 1 {
		t.Errorf("under another fence: %d to put", len(put))
	}
	if _, _, _, _, err := s.prepareState("t", 1, []byte(`[1]`), fields); err == nil {
		t.Error("fields apart from a state that is not an object")
	}
}
