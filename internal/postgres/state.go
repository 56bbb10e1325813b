package postgres

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"unsafe"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/jsonobj"
)

// Large states (00050_state_blobs.sql). A top-level field of a state whose
// JSON is at least blobMin bytes is stored once per task in state_blobs,
// addressed by the SHA-256 of its bytes; the checkpoint keeps the small
// fields in `state` and the addresses in `state_refs`. Below blobMin a
// field costs less inline than a blob row and its index entry.
const blobMin = 2048

// emptyRefs is state_refs without large fields: shared, never modified.
var emptyRefs = []byte(`{}`)

// blob is one large field of a state.
type blob struct {
	key  string // decoded
	val  []byte
	hash [32]byte
}

// splitState divides a state into what stays inline and its large fields.
// A state it cannot split stays whole.
func splitState(state []byte) (inline []byte, blobs []blob) {
	if len(state) < blobMin {
		// No field of it is large: most states, at every step.
		return state, nil
	}
	ms, ok := jsonobj.Split(state)
	if !ok {
		return state, nil
	}
	big := 0
	for _, m := range ms {
		if len(m.Val) >= blobMin {
			big++
		}
	}
	if big == 0 {
		return state, nil
	}
	blobs = make([]blob, 0, big)
	kept := make([]jsonobj.Member, 0, len(ms)-big)
	for _, m := range ms {
		if len(m.Val) >= blobMin {
			var key string
			if err := json.Unmarshal(m.Key, &key); err != nil {
				return state, nil
			}
			blobs = append(blobs, blob{key: key, val: m.Val})
			continue
		}
		kept = append(kept, m)
	}
	return jsonobj.Join(kept, 0), blobs
}

// refsJSON encodes the addresses of blobs as state_refs.
func refsJSON(blobs []blob) ([]byte, error) {
	refs := make(map[string]string, len(blobs))
	for _, b := range blobs {
		refs[b.key] = hex.EncodeToString(b.hash[:])
	}
	return json.Marshal(refs)
}

// joinState rebuilds a state from its inline part and the values of its
// large fields (keys[i] names vals[i]). refs is the row's state_refs: a
// field it names whose blob is missing is an error, never a silent loss.
// A field both inline and in refs is taken from inline (a row written
// whole wins; see the migration).
func joinState(inline, refs json.RawMessage, keys, vals []string) (json.RawMessage, error) {
	if len(refs) == 0 || bytes.Equal(refs, []byte("{}")) {
		return inline, nil
	}
	var want map[string]string
	if err := json.Unmarshal(refs, &want); err != nil {
		return nil, fmt.Errorf("state_refs: %w", err)
	}
	if len(vals) != len(keys) {
		return nil, fmt.Errorf("state_refs: %d blobs for %d fields", len(vals), len(keys))
	}
	if err := blobsMissing(want, len(keys), func(k string) bool { return containsString(keys, k) }); err != nil {
		return nil, err
	}
	ms, ok := jsonobj.Split(inline)
	if !ok {
		return nil, fmt.Errorf("state is not an object but names large fields %v", keys)
	}
	size := len(inline)
	for i := range keys {
		size += len(keys[i]) + len(vals[i]) + 8
	}
	have := make(map[string]bool, len(ms))
	for _, m := range ms {
		if bytes.IndexByte(m.Key, '\\') < 0 {
			have[string(m.Key[1:len(m.Key)-1])] = true
		} else {
			var k string
			if json.Unmarshal(m.Key, &k) == nil {
				have[k] = true
			}
		}
	}
	for i, k := range keys {
		if have[k] {
			continue
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		// Only read, by Join: spare a copy of a large value.
		ms = append(ms, jsonobj.Member{Key: kb, Val: unsafe.Slice(unsafe.StringData(vals[i]), len(vals[i]))})
	}
	return jsonobj.Join(ms, size), nil
}

func containsString(a []string, s string) bool {
	for _, x := range a {
		if x == s {
			return true
		}
	}
	return false
}

// blobCache remembers, per task, the large fields of the last checkpoint
// this store committed or loaded, for two uses. A commit by the same lease
// need not hash nor send a field whose bytes did not change: its blob is
// known to be stored, and comparing bytes is ~20× cheaper than hashing them
// (free when they are the very slice remembered). And a load need not read
// back the value of a blob it holds: a blob is addressed by the hash of its
// bytes, so the value of a task's hash never changes.
//
// "Known to be stored" holds for one fence only: under a new lease the task
// may have ended meanwhile and its blobs been pruned. Only a committed
// write or a load fills the cache, and the values it holds are never
// modified (they are shared with the checkpoints that carried them).
type blobCache struct {
	mu    sync.Mutex
	tasks map[string]*cachedTask
	size  int // bytes of the values held
}

type cachedTask struct {
	fence  int64 // the lease fence under which fields are known stored
	fields []blob
	size   int
}

// blobCacheMax and blobCacheBytes bound what the cache holds. A task that
// ends leaves it; running tasks (fewer than the workers of a replica) and
// the waiting tasks this replica ran last stay, and the bounds guard
// against a leak, not a working set.
const (
	blobCacheMax   = 4096
	blobCacheBytes = 64 << 20
)

// sameBytes is bytes.Equal, in constant time when a and b are one slice.
func sameBytes(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || &a[0] == &b[0] || bytes.Equal(a, b)
}

// known returns the stored blob of the task's field key when it holds
// exactly val.
func (c *blobCache) known(task string, fence int64, key string, val []byte) (blob, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tasks[task]
	if t == nil || t.fence != fence {
		return blob{}, false
	}
	for _, b := range t.fields {
		if b.key == key && sameBytes(b.val, val) {
			return b, true
		}
	}
	return blob{}, false
}

// held returns the task's blobs the cache holds the values of, whatever
// the fence, and their hashes (for TaskSnapshot's have).
func (c *blobCache) held(task string) ([]blob, [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tasks[task]
	if t == nil {
		return nil, [][]byte{}
	}
	blobs := slices.Clone(t.fields)
	hashes := make([][]byte, len(blobs))
	for i := range blobs {
		hashes[i] = blobs[i].hash[:]
	}
	return blobs, hashes
}

// put records the large fields of a checkpoint of task that is now stored
// under fence.
func (c *blobCache) put(task string, fence int64, blobs []blob) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(task)
	if len(blobs) == 0 {
		return
	}
	t := &cachedTask{fence: fence, fields: slices.Clone(blobs)}
	for _, b := range blobs {
		t.size += len(b.val)
	}
	if t.size > blobCacheBytes {
		return
	}
	if c.tasks == nil {
		c.tasks = map[string]*cachedTask{}
	}
	for id := range c.tasks {
		if len(c.tasks) < blobCacheMax && c.size+t.size <= blobCacheBytes {
			break
		}
		c.dropLocked(id)
	}
	c.tasks[task] = t
	c.size += t.size
}

func (c *blobCache) dropLocked(task string) {
	if t, ok := c.tasks[task]; ok {
		c.size -= t.size
		delete(c.tasks, task)
	}
}

func (c *blobCache) forget(task string) {
	c.mu.Lock()
	c.dropLocked(task)
	c.mu.Unlock()
}

// prepareState splits a checkpoint's state for a commit by task at fence:
// the inline part, the refs, and the blobs to store (those not known to be
// stored already), with every large field in all (for the cache).
func (s *Store) prepareState(task string, fence int64, state []byte, fields []graph.StateField) (inline, refs []byte, put, all []blob, err error) {
	inline, all = splitState(state)
	if len(fields) > 0 {
		if _, ok := jsonobj.Split(inline); !ok {
			return nil, nil, nil, nil, fmt.Errorf("state is not an object but has fields kept apart")
		}
		for _, f := range fields {
			all = append(all, blob{key: f.Key, val: f.JSON})
		}
	}
	if len(all) == 0 {
		return inline, emptyRefs, nil, nil, nil
	}
	for i := range all {
		if b, ok := s.blobs.known(task, fence, all[i].key, all[i].val); ok {
			all[i].hash = b.hash
			all[i].val = b.val // the remembered slice: the next compare is free
			continue
		}
		all[i].hash = sha256.Sum256(all[i].val)
		put = append(put, all[i])
	}
	refs, err = refsJSON(all)
	return inline, refs, put, all, err
}

// apartState is joinState for a run (graph.FieldCheckpointer): the state
// without its large fields, and those. A field both inline and in refs is
// inline's (as joinState has it), and a blob missing is an error.
func apartState(inline, refs json.RawMessage, blobs []blob) (json.RawMessage, []graph.StateField, error) {
	if len(refs) == 0 || bytes.Equal(refs, []byte("{}")) {
		return inline, nil, nil
	}
	var want map[string]string
	if err := json.Unmarshal(refs, &want); err != nil {
		return nil, nil, fmt.Errorf("state_refs: %w", err)
	}
	if err := blobsMissing(want, len(blobs), func(k string) bool {
		return slices.ContainsFunc(blobs, func(b blob) bool { return b.key == k })
	}); err != nil {
		return nil, nil, err
	}
	ms, ok := jsonobj.Split(inline)
	if !ok {
		return nil, nil, fmt.Errorf("state is not an object but names large fields %v", slices.Sorted(maps.Keys(want)))
	}
	fields := make([]graph.StateField, 0, len(blobs))
	for _, b := range blobs {
		if slices.ContainsFunc(ms, func(m jsonobj.Member) bool { return memberIs(m.Key, b.key) }) {
			continue
		}
		fields = append(fields, graph.StateField{Key: b.key, JSON: b.val})
	}
	return inline, fields, nil
}

// memberIs reports whether the JSON string key names k.
func memberIs(key []byte, k string) bool {
	if bytes.IndexByte(key, '\\') < 0 {
		return string(key[1:len(key)-1]) == k
	}
	var s string
	return json.Unmarshal(key, &s) == nil && s == k
}

// blobsMissing is the error for the fields of refs (want) whose blobs
// did not come (have tells which did), or nil when none is missing.
func blobsMissing(want map[string]string, n int, have func(string) bool) error {
	if n == len(want) {
		return nil
	}
	missing := make([]string, 0, len(want))
	for k := range want {
		if !have(k) {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	return fmt.Errorf("state_refs: the blobs of fields %q are missing", missing)
}

// loadedBlobs completes the blobs of a loaded checkpoint: vals[i] is the
// value of field keys[i], or "" when the query left out a value held (the
// blobs TaskSnapshot's have named). It reports false for refs it cannot
// read or a value left out that held does not have.
func loadedBlobs(held []blob, refs json.RawMessage, keys, vals []string) ([]blob, bool) {
	if len(keys) == 0 {
		return nil, true
	}
	var hashes map[string]string
	if err := json.Unmarshal(refs, &hashes); err != nil || len(vals) != len(keys) {
		return nil, false
	}
	blobs := make([]blob, len(keys))
	for i, k := range keys {
		b := &blobs[i]
		b.key = k
		if h, err := hex.DecodeString(hashes[k]); err != nil || len(h) != sha256.Size {
			return nil, false
		} else {
			copy(b.hash[:], h)
		}
		if vals[i] != "" {
			// a string is never modified: the cache may share its bytes
			b.val = unsafe.Slice(unsafe.StringData(vals[i]), len(vals[i]))
			continue
		}
		j := slices.IndexFunc(held, func(h blob) bool { return h.hash == b.hash })
		if j < 0 {
			return nil, false
		}
		b.val = held[j].val
		vals[i] = unsafe.String(unsafe.SliceData(b.val), len(b.val))
	}
	return blobs, true
}
