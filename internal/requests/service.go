package requests

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/jcs"
	"github.com/gatehousehq/gatehouse/internal/notify"
	"github.com/gatehousehq/gatehouse/internal/workflows/request"
)

// Record is a request as stored, with where its task stands (the store
// reads it in one statement).
type Record struct {
	ID             string
	CreatedBy      string
	IdempotencyKey string // "" for none
	Kind           string
	// Body is the request as created (request.Input), also the task's input.
	Body        json.RawMessage
	CallbackURL string
	Via         string
	CreatedAt   time.Time
	// TaskStatus is "" while the task is not created yet.
	TaskStatus string
	// The request's interrupt ("" before it is raised) and its decision
	// (DecisionAction "" for none).
	InterruptID      string
	InterruptStatus  string
	Deadline         *time.Time
	PayloadSHA256    string
	ResolvedAt       *time.Time
	DecisionAction   string
	DecisionFeedback string
	DecisionValue    json.RawMessage
	DecisionBy       string
	DecidedAt        *time.Time
	// Status is the request's status (the store computes it: pending,
	// approved, …).
	Status string
}

// NewRecord is a request's row as Create writes it.
type NewRecord struct {
	ID             string
	CreatedBy      string
	IdempotencyKey string
	BodySHA256     string
	Kind           string
	Body           json.RawMessage
	CallbackURL    string
	CallbackSecret string
	Via            string
}

// Creation is a request's row written with its task, in the task's first
// commit (graph.NewTask.With): the store writes Row in the same
// transaction as the task, its interrupt and its events, so that a
// request is never without its task, and reads the request back into Got
// in that transaction too (no round trip of its own). When Row's
// principal used its idempotency key already, the commit fails with
// ErrKeyUsed and writes nothing.
type Creation struct {
	Row NewRecord
	Got Record
}

// ErrKeyUsed is a request's creation that found its idempotency key used
// already by the same principal (the store's unique index says so, even
// for repeats sent at the same moment): nothing was written.
var ErrKeyUsed = errors.New("idempotency key used already")

// Keyed is the request a principal made with an idempotency key.
type Keyed struct {
	ID             string
	BodySHA256     string
	CallbackSecret string
}

// ListQuery is a page of the list as the store reads it.
type ListQuery struct {
	Status, Kind string
	AfterAt      *time.Time
	AfterID      string
	Limit        int
}

// Store is what the service reads and writes.
type Store interface {
	// RequestByKey errors: ErrNotFound.
	RequestByKey(ctx context.Context, principal, key string) (Keyed, error)
	// RequestGet errors: ErrNotFound.
	RequestGet(ctx context.Context, id string) (Record, error)
	RequestList(ctx context.Context, q ListQuery) ([]Record, error)
	// RequestOrphans lists requests written before before whose task was
	// never created (by a version that wrote them in two transactions).
	RequestOrphans(ctx context.Context, before time.Time) ([]Record, error)
	// RequestsSettled lists which of ids are no longer pending.
	RequestsSettled(ctx context.Context, ids []string) ([]string, error)
	// RequestCallback errors: ErrNotFound.
	RequestCallback(ctx context.Context, id string) (url, secret string, err error)
	// RequestCancel cancels the request's task as actor, through via
	// (task.cancelled carries both). Errors: graph.ErrTaskNotFound, an
	// error that is graph.ErrConflict when the task has ended.
	RequestCancel(ctx context.Context, id, actor, via string) error
}

// Engine creates the requests' tasks (graph.Engine), each with its
// request's row as the NewTask's With (a *Creation) in one commit.
type Engine interface {
	CreateAsking(ctx context.Context, nt graph.NewTask, q graph.Question) (*graph.Task, *graph.Interrupt, error)
}

// Events tells a waiter that a task has new events (live.Hub.Watch): the
// channel is closed when the watch was dropped; stop ends it.
type Events interface {
	Watch(taskID string) (events <-chan graph.Event, stop func())
}

// Config is what a Service needs.
type Config struct {
	Store  Store
	Engine Engine
	// Events wakes long polls; nil: they poll.
	Events Events
	// Wake, when set, is called after a task was created runnable (a
	// rule decided its request at once: the runner's fast path); may be
	// nil.
	Wake func()
	// PublicURL is GATEHOUSE_PUBLIC_URL ("": urls are paths).
	PublicURL string
	// AllowPrivate lets callback URLs reach loopback and private
	// addresses (GATEHOUSE_WEBHOOK_ALLOW_PRIVATE).
	AllowPrivate bool
	Logger       *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Service makes, reads, waits for and cancels approval requests.
type Service struct {
	store        Store
	engine       Engine
	events       Events
	wake         func()
	publicURL    string
	allowPrivate bool
	log          *slog.Logger
	now          func() time.Time
	waits        waitSet
}

// NewService returns a Service.
func NewService(c Config) *Service {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return &Service{store: c.Store, engine: c.Engine, events: c.Events, wake: c.Wake,
		publicURL: strings.TrimRight(c.PublicURL, "/"), allowPrivate: c.AllowPrivate, log: c.Logger, now: c.Now}
}

// Create makes a request as principal through via (ViaAPI, ViaMCP). With
// an idempotency key the principal used before, it returns that request
// (created false) and its callback secret, whoever asks concurrently; the
// same key with another body is a *ConflictError. Errors: *FieldError,
// *ConflictError, *auth.ForbiddenError (an operator's role is needed).
func (s *Service) Create(ctx context.Context, p auth.Principal, in CreateInput, via string) (Request, bool, string, error) {
	if !p.Can(auth.RoleOperator) {
		return Request{}, false, "", &auth.ForbiddenError{Reason: fmt.Sprintf(
			"making approval requests needs the operator role; %s is %s", p.Name, p.Role.Article())}
	}
	n, err := s.normalize(ctx, in)
	if err != nil {
		return Request{}, false, "", err
	}
	n.input.RequestedBy, n.input.Via = p.Name, via
	body, err := json.Marshal(n.input)
	if err != nil {
		return Request{}, false, "", err
	}
	// The body as the principal sent it, but for the key: the same
	// request twice hashes the same.
	hashed := in
	hashed.IdempotencyKey = ""
	sum, err := bodyHash(hashed)
	if err != nil {
		return Request{}, false, "", err
	}
	rec := NewRecord{ID: graph.NewID(), CreatedBy: p.Name, IdempotencyKey: n.key, BodySHA256: sum, Kind: n.input.Kind,
		Body: body, CallbackURL: n.callbackURL, Via: via}
	if rec.CallbackURL != "" {
		rec.CallbackSecret = notify.NewSecret()
	}
	// One transaction: the row (whose unique key decides among
	// concurrent repeats), the task waiting on its interrupt, the events,
	// and the request read back.
	cr := &Creation{Row: rec}
	err = s.createTask(ctx, Record{ID: rec.ID, CreatedBy: rec.CreatedBy, Body: body, Via: via}, n.input, cr)
	if errors.Is(err, ErrKeyUsed) {
		return s.repeat(ctx, p, n.key, sum)
	}
	if err != nil {
		return Request{}, false, "", err
	}
	if cr.Got.TaskStatus == string(graph.StatusQueued) && s.wake != nil {
		s.wake()
	}
	return s.request(cr.Got), true, rec.CallbackSecret, nil
}

// repeat is Create for an idempotency key the principal used already:
// that request, or a *ConflictError when it was made with another body.
func (s *Service) repeat(ctx context.Context, p auth.Principal, key, sum string) (Request, bool, string, error) {
	k, err := s.store.RequestByKey(ctx, p.Name, key)
	if err != nil {
		return Request{}, false, "", err
	}
	if k.BodySHA256 != sum {
		return Request{}, false, "", &ConflictError{Reason: fmt.Sprintf(
			"idempotency_key %q was used for another request (%s) with a different body", key, k.ID)}
	}
	r, err := s.complete(ctx, k.ID)
	return r, false, k.CallbackSecret, err
}

// bodyHash is the SHA-256 of a request body's canonical JSON.
func bodyHash(in CreateInput) (string, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return "", err
	}
	return jcs.SHA256Hex(b)
}

// complete returns a request, creating its task first when it has none
// (a request written by a version that wrote the request and its task in
// two transactions, and stopped between them). Two of them creating the
// same task at once make one: the id is the task's.
func (s *Service) complete(ctx context.Context, id string) (Request, error) {
	rec, err := s.store.RequestGet(ctx, id)
	if err != nil {
		return Request{}, err
	}
	if rec.TaskStatus != "" {
		return s.request(rec), nil
	}
	var in request.Input
	if err := json.Unmarshal(rec.Body, &in); err != nil {
		return Request{}, fmt.Errorf("request %s: stored body: %w", rec.ID, err)
	}
	if err := s.createTask(ctx, rec, in, nil); err != nil {
		// Another caller may have made it meanwhile.
		again, gerr := s.store.RequestGet(ctx, id)
		if gerr != nil || again.TaskStatus == "" {
			return Request{}, err
		}
		return s.request(again), nil
	}
	if rec, err = s.store.RequestGet(ctx, id); err != nil {
		return Request{}, err
	}
	if rec.TaskStatus == string(graph.StatusQueued) && s.wake != nil {
		s.wake()
	}
	return s.request(rec), nil
}

// createTask creates the task of request rec (its ID, CreatedBy, Body and Via),
// whose body is in, waiting on its interrupt, with the request's row when
// with is set (one commit).
func (s *Service) createTask(ctx context.Context, rec Record, in request.Input, with *Creation) error {
	var opts json.RawMessage
	if in.Deadline != "" {
		d, err := s.deadlineAfter(in.Deadline, s.now())
		if err != nil {
			d = time.Second // passed while the task was not made: due at once
		}
		opts, _ = json.Marshal(map[string]any{"deadlines": map[string]string{in.Kind: d.String()}})
	}
	nt := graph.NewTask{ID: rec.ID, Workflow: request.Name, Title: in.Title, Input: rec.Body,
		Options: opts, CreatedBy: rec.CreatedBy, Via: rec.Via}
	if with != nil {
		nt.With = with
	}
	_, _, err := s.engine.CreateAsking(ctx, nt, request.Question(in))
	return err
}

// Recover creates the tasks of requests whose process stopped between
// writing the request and its task, in a version that wrote them in two
// transactions (at start; a repeat of the request does it too).
func (s *Service) Recover(ctx context.Context) error {
	orphans, err := s.store.RequestOrphans(ctx, s.now().Add(-5*time.Second))
	if err != nil {
		return err
	}
	for _, rec := range orphans {
		if _, err := s.complete(ctx, rec.ID); err != nil {
			return fmt.Errorf("request %s: %w", rec.ID, err)
		}
		s.log.Info("created the task of a request made before a stop", "request", rec.ID)
	}
	return nil
}

// Get returns a request. Errors: ErrNotFound.
func (s *Service) Get(ctx context.Context, id string) (Request, error) {
	if !graph.ValidID(id) {
		return Request{}, ErrNotFound
	}
	rec, err := s.store.RequestGet(ctx, id)
	if err != nil {
		return Request{}, err
	}
	return s.request(rec), nil
}

// settles reports whether an event of a request's task may have ended
// its pending.
func settles(typ string) bool {
	switch typ {
	case graph.EventDecisionRecorded, graph.EventTaskCancelled, graph.EventTaskFailed, graph.EventTaskCompleted,
		"interrupt.expired":
		return true
	}
	return false
}

// pollEvery is the long polls' fallback read, should a wake-up be lost.
const pollEvery = 10 * time.Second

// Wait returns the request once it is no longer pending, or after d (at
// most MaxWait) as it then is. It holds no database connection while it
// waits: the events of the request's task wake it, and, should a wake-up
// be lost, one read of every waiting request each pollEvery (waitSet)
// does. Without Events each wait reads its request each pollEvery.
// Errors: Get's, and ctx's.
func (s *Service) Wait(ctx context.Context, id string, d time.Duration) (Request, error) {
	if d <= 0 {
		return s.Get(ctx, id)
	}
	d = min(d, MaxWait)
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	// Woken by the hub, with the waits' shared fallback read (joined
	// after the first read); without a hub, each wait reads its request
	// each pollEvery.
	var kick <-chan struct{}
	var tick <-chan time.Time
	if s.events == nil {
		t := time.NewTicker(pollEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		var evs <-chan graph.Event
		stop := func() {}
		if s.events != nil {
			evs, stop = s.events.Watch(id)
		}
		r, err := s.Get(ctx, id)
		if err != nil || !r.Pending() {
			stop()
			return r, err
		}
		if s.events != nil && kick == nil {
			k, leave := s.waits.join(s, id)
			defer leave()
			kick = k
		}
		dropped := false
	wait:
		for {
			select {
			case ev, ok := <-evs:
				if !ok {
					dropped = true
					break wait
				}
				if settles(ev.Type) {
					break wait
				}
			case <-kick:
				break wait
			case <-tick:
				break wait
			case <-deadline.C:
				stop()
				return s.Get(ctx, id)
			case <-ctx.Done():
				stop()
				return r, ctx.Err()
			}
		}
		stop()
		if dropped {
			// The hub lost its connection, or this waiter was slow: read
			// again after a breath, then watch afresh.
			select {
			case <-time.After(50 * time.Millisecond):
			case <-ctx.Done():
				return r, ctx.Err()
			}
		}
	}
}

// waitSet is the requests being waited for, and their waits' kicks: one
// sweep (running while anyone waits) reads, each pollEvery, which of them
// are settled, in one statement on one connection, and kicks their waits
// to read them again. 1,000 waits cost one read each pollEvery, not 1,000.
type waitSet struct {
	mu      sync.Mutex
	byID    map[string]map[chan struct{}]struct{}
	running bool
}

// Waiting is the number of long polls waiting now, past their first read
// (with Events; without, 0).
func (s *Service) Waiting() int {
	s.waits.mu.Lock()
	defer s.waits.mu.Unlock()
	n := 0
	for _, cs := range s.waits.byID {
		n += len(cs)
	}
	return n
}

// join adds a wait for id; kick is sent to when the sweep finds it
// settled; leave ends the wait.
func (w *waitSet) join(s *Service, id string) (kick <-chan struct{}, leave func()) {
	c := make(chan struct{}, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byID == nil {
		w.byID = map[string]map[chan struct{}]struct{}{}
	}
	if w.byID[id] == nil {
		w.byID[id] = map[chan struct{}]struct{}{}
	}
	w.byID[id][c] = struct{}{}
	if !w.running {
		w.running = true
		go w.sweep(s)
	}
	return c, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.byID[id], c)
		if len(w.byID[id]) == 0 {
			delete(w.byID, id)
		}
	}
}

// sweep runs while anyone waits.
func (w *waitSet) sweep(s *Service) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for range t.C {
		w.mu.Lock()
		if len(w.byID) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		ids := make([]string, 0, len(w.byID))
		for id := range w.byID {
			ids = append(ids, id)
		}
		w.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), pollEvery)
		settled, err := s.store.RequestsSettled(ctx, ids)
		cancel()
		if err != nil {
			s.log.Warn("the long polls' fallback read", "waiting", len(ids), "error", err)
			continue
		}
		if len(settled) > 0 {
			s.log.Debug("the long polls' fallback read found requests settled without a wake-up", "settled", len(settled))
		}
		w.mu.Lock()
		for _, id := range settled {
			for c := range w.byID[id] {
				select {
				case c <- struct{}{}:
				default:
				}
			}
		}
		w.mu.Unlock()
	}
}

// List returns a page of requests, newest first. Errors: *FieldError for
// a bad status, kind, limit or cursor.
func (s *Service) List(ctx context.Context, f ListFilter) (Page, error) {
	q := ListQuery{Status: strings.TrimSpace(f.Status), Kind: strings.TrimSpace(f.Kind), Limit: f.Limit}
	if q.Status != "" && !slices.Contains(Statuses, q.Status) {
		return Page{}, &FieldError{Field: "status", Problem: fmt.Sprintf("%q: want one of %s", q.Status, strings.Join(Statuses, ", "))}
	}
	if q.Kind != "" && !auth.ValidKind(q.Kind) {
		return Page{}, &FieldError{Field: "kind", Problem: auth.KindProblem}
	}
	switch {
	case q.Limit == 0:
		q.Limit = 50
	case q.Limit < 1 || q.Limit > 200:
		return Page{}, &FieldError{Field: "limit", Problem: "must be from 1 to 200"}
	}
	if f.Cursor != "" {
		at, id, err := parseCursor(f.Cursor)
		if err != nil {
			return Page{}, &FieldError{Field: "cursor", Problem: "is not a cursor this list gave"}
		}
		q.AfterAt, q.AfterID = &at, id
	}
	recs, err := s.store.RequestList(ctx, ListQuery{Status: q.Status, Kind: q.Kind, AfterAt: q.AfterAt, AfterID: q.AfterID, Limit: q.Limit + 1})
	if err != nil {
		return Page{}, err
	}
	page := Page{Requests: make([]Request, 0, min(len(recs), q.Limit))}
	for i, rec := range recs {
		if i == q.Limit {
			c := cursor(recs[i-1])
			page.NextCursor = &c
			break
		}
		page.Requests = append(page.Requests, s.request(rec))
	}
	return page, nil
}

func cursor(r Record) string {
	return base64.RawURLEncoding.EncodeToString([]byte(r.CreatedAt.UTC().Format(time.RFC3339Nano) + "," + r.ID))
}

func parseCursor(c string) (time.Time, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, "", err
	}
	at, id, ok := strings.Cut(string(b), ",")
	if !ok || !graph.ValidID(id) {
		return time.Time{}, "", errors.New("bad cursor")
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	return t, id, err
}

// Cancel cancels a pending request as principal (its creator or an
// admin) through via. Errors: ErrNotFound, *auth.ForbiddenError,
// *ConflictError when it is no longer pending.
func (s *Service) Cancel(ctx context.Context, p auth.Principal, id, via string) (Request, error) {
	r, err := s.Get(ctx, id)
	if err != nil {
		return Request{}, err
	}
	if r.CreatedBy != p.Name && !p.Can(auth.RoleAdmin) {
		return Request{}, &auth.ForbiddenError{Reason: fmt.Sprintf(
			"only the request's creator (%s) or an admin may cancel it; %s is neither", r.CreatedBy, p.Name)}
	}
	if !r.Pending() {
		return Request{}, &ConflictError{Reason: fmt.Sprintf("request %s is %s, no longer pending", r.ID, r.Status)}
	}
	if err := s.store.RequestCancel(ctx, id, p.Name, via); err != nil {
		if errors.Is(err, graph.ErrConflict) {
			r, _ = s.Get(ctx, id)
			return Request{}, &ConflictError{Reason: fmt.Sprintf("request %s is %s, no longer pending", id, r.Status)}
		}
		return Request{}, err
	}
	return s.Get(ctx, id)
}

// URL is a request's desk page.
func (s *Service) URL(id string) string { return s.publicURL + "/tasks/" + id }

// request turns a record into the API's Request.
func (s *Service) request(rec Record) Request {
	var in request.Input
	_ = json.Unmarshal(rec.Body, &in)
	r := Request{ID: rec.ID, Kind: rec.Kind, Title: in.Title, Description: in.Description, Payload: in.Payload,
		PayloadSHA256: rec.PayloadSHA256, Actions: in.Actions, ResponseSchema: in.ResponseSchema, Status: rec.Status,
		Deadline: rec.Deadline, CreatedBy: rec.CreatedBy, CreatedAt: rec.CreatedAt, URL: s.URL(rec.ID),
		TaskID: rec.ID, InterruptID: rec.InterruptID, Metadata: in.Metadata, Via: rec.Via}
	if len(r.Payload) == 0 {
		r.Payload = json.RawMessage(`{}`)
	}
	if r.Actions == nil {
		r.Actions = []string{}
	}
	if rec.IdempotencyKey != "" {
		k := rec.IdempotencyKey
		r.IdempotencyKey = &k
	}
	if r.Status != StatusPending {
		r.DecidedAt = rec.ResolvedAt
	}
	if rec.DecisionAction != "" {
		d := &Decision{Action: rec.DecisionAction, By: rec.DecisionBy, Feedback: rec.DecisionFeedback,
			Value: decisionValue(rec.DecisionAction, rec.DecisionValue, rec.DecisionFeedback, in.ResponseSchema != nil)}
		if rec.DecidedAt != nil {
			d.At = *rec.DecidedAt
		}
		r.Decision = d
	}
	return r
}

// decisionValue is a decision's value as a request shows it: an edit's
// payload as a JSON object, an answer typed (or a string), else null.
func decisionValue(action string, v json.RawMessage, feedback string, typed bool) json.RawMessage {
	v = bytes.TrimSpace(v)
	if string(v) == "null" {
		v = nil
	}
	switch action {
	case graph.ActionEdit:
		var s string
		if json.Unmarshal(v, &s) == nil && json.Valid([]byte(s)) {
			return json.RawMessage(s)
		}
		return v
	case graph.ActionRespond:
		if len(v) == 0 && feedback != "" {
			b, _ := json.Marshal(feedback)
			return b
		}
		if !typed && len(v) > 0 && v[0] != '"' {
			b, _ := json.Marshal(string(v))
			return b
		}
		return v
	}
	if len(v) == 0 {
		return nil
	}
	return v
}
