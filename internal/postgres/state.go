package postgres

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/gatehousehq/gatehouse/internal/jsonobj"
)

// Large states (00050_state_blobs.sql). A top-level field of a state whose
// JSON is at least blobMin bytes is stored once per task in state_blobs,
// addressed by the SHA-256 of its bytes; the checkpoint keeps the small
// fields in `state` and the addresses in `state_refs`. Below blobMin a
// field costs less inline than a blob row and its index entry.
const blobMin = 2048

// blob is one large field of a state.
type blob struct {
	key  string // decoded
	val  []byte
	hash [32]byte
}

// splitState divides a state into what stays inline and its large fields.
// A state it cannot split stays whole.
func splitState(state []byte) (inline []byte, blobs []blob) {
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
	var sb bytes.Buffer
	sb.WriteByte('{')
	for _, m := range ms {
		if len(m.Val) >= blobMin {
			var key string
			if err := json.Unmarshal(m.Key, &key); err != nil {
				return state, nil
			}
			blobs = append(blobs, blob{key: key, val: m.Val})
			continue
		}
		if sb.Len() > 1 {
			sb.WriteByte(',')
		}
		sb.Write(m.Key)
		sb.WriteByte(':')
		sb.Write(m.Val)
	}
	sb.WriteByte('}')
	return sb.Bytes(), blobs
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
	if len(keys) != len(want) || len(vals) != len(keys) {
		missing := make([]string, 0, len(want))
		for k := range want {
			if !containsString(keys, k) {
				missing = append(missing, k)
			}
		}
		sort.Strings(missing)
		return nil, fmt.Errorf("state_refs: the blobs of fields %q are missing", missing)
	}
	ms, ok := jsonobj.Split(inline)
	if !ok {
		return nil, fmt.Errorf("state is not an object but names large fields %v", keys)
	}
	size := len(inline)
	for i := range keys {
		size += len(keys[i]) + len(vals[i]) + 8
	}
	out := bytes.NewBuffer(make([]byte, 0, size))
	out.WriteByte('{')
	have := make(map[string]bool, len(ms))
	for _, m := range ms {
		if out.Len() > 1 {
			out.WriteByte(',')
		}
		out.Write(m.Key)
		out.WriteByte(':')
		out.Write(m.Val)
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
		if out.Len() > 1 {
			out.WriteByte(',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		out.Write(kb)
		out.WriteByte(':')
		out.WriteString(vals[i])
	}
	out.WriteByte('}')
	return out.Bytes(), nil
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
// this store committed or loaded for a run, so that a field that did not
// change is neither hashed nor sent again: comparing bytes is ~20× cheaper
// than hashing them, and the blob is known to be stored. An entry is valid
// for one fence only: a new lease (another worker, maybe another replica,
// wrote since) starts afresh. Only a committed write or a load fills it.
type blobCache struct {
	mu    sync.Mutex
	tasks map[string]*cachedTask
}

type cachedTask struct {
	fence  int64
	fields map[string]blob
}

// blobCacheMax bounds the tasks remembered: a task that waits or ends
// leaves the cache, so only running tasks stay, fewer than the workers of
// a replica; the bound guards against a leak, not a working set.
const blobCacheMax = 4096

// known returns the stored blob of the task's field key when it holds
// exactly val.
func (c *blobCache) known(task string, fence int64, key string, val []byte) (blob, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tasks[task]
	if t == nil || t.fence != fence {
		return blob{}, false
	}
	b, ok := t.fields[key]
	if !ok || !bytes.Equal(b.val, val) {
		return blob{}, false
	}
	return b, true
}

// put records the large fields of a checkpoint that is now stored.
func (c *blobCache) put(task string, fence int64, blobs []blob) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(blobs) == 0 {
		delete(c.tasks, task)
		return
	}
	if c.tasks == nil {
		c.tasks = map[string]*cachedTask{}
	}
	if _, ok := c.tasks[task]; !ok && len(c.tasks) >= blobCacheMax {
		clear(c.tasks)
	}
	t := &cachedTask{fence: fence, fields: make(map[string]blob, len(blobs))}
	for _, b := range blobs {
		t.fields[b.key] = b
	}
	c.tasks[task] = t
}

func (c *blobCache) forget(task string) {
	c.mu.Lock()
	delete(c.tasks, task)
	c.mu.Unlock()
}

// prepareState splits a checkpoint's state for a commit by task at fence:
// the inline part, the refs, and the blobs to store (those not known to be
// stored already), with every large field in all (for the cache).
func (s *Store) prepareState(task string, fence int64, state []byte) (inline, refs []byte, put, all []blob, err error) {
	inline, all = splitState(state)
	if len(all) == 0 {
		return inline, []byte("{}"), nil, nil, nil
	}
	for i := range all {
		if b, ok := s.blobs.known(task, fence, all[i].key, all[i].val); ok {
			all[i].hash = b.hash
			continue
		}
		all[i].hash = sha256.Sum256(all[i].val)
		put = append(put, all[i])
	}
	refs, err = refsJSON(all)
	return inline, refs, put, all, err
}

// cacheLoaded primes the cache with the large fields of a checkpoint
// loaded by a run at fence.
func (s *Store) cacheLoaded(task string, fence int64, refs json.RawMessage, keys, vals []string) {
	if len(keys) == 0 {
		return
	}
	var hashes map[string]string
	if json.Unmarshal(refs, &hashes) != nil {
		return
	}
	blobs := make([]blob, 0, len(keys))
	for i, k := range keys {
		h, err := hex.DecodeString(hashes[k])
		if err != nil || len(h) != sha256.Size {
			return
		}
		b := blob{key: k, val: []byte(vals[i])}
		copy(b.hash[:], h)
		blobs = append(blobs, b)
	}
	s.blobs.put(task, fence, blobs)
}
