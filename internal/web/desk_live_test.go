package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gatehousehq/gatehouse/internal/auth"
)

// livePageConn is a task page's socket as a test sees it: the timeline
// seqs it was sent, in order, and the decision areas.
type livePageConn struct {
	name  string
	conn  *websocket.Conn
	start int64

	mu    sync.Mutex
	seqs  []int64
	meta  int64
	areas []string
	done  chan struct{}
}

var (
	timelineSeqRe = regexp.MustCompile(`<li id="ev-\d+"[^>]* data-seq="(\d+)"`)
	areaRe        = regexp.MustCompile(`(?s)<div id="interrupt".*`)
)

func (p *livePageConn) read() {
	defer close(p.done)
	for {
		_, r, err := p.conn.NextReader()
		if err != nil {
			return
		}
		msg, err := io.ReadAll(r)
		if err != nil {
			return
		}
		p.mu.Lock()
		for _, m := range timelineSeqRe.FindAllSubmatch(msg, -1) {
			n, _ := strconv.ParseInt(string(m[1]), 10, 64)
			p.seqs = append(p.seqs, n)
		}
		if n, ok := metaSeq(msg); ok {
			p.meta = n
		}
		if a := areaRe.Find(msg); a != nil {
			p.areas = append(p.areas, string(a))
		}
		p.mu.Unlock()
	}
}

// TestLiveFanoutEveryPage: pages of one task, of two principals, opened
// at the current seq, from the start, and following the artifact view,
// all get every event once, in order, with the decision area their
// principal may use, while the task goes through a decision to its next
// gate (the broadcast is framed once per variant and shared).
func TestLiveFanoutEveryPage(t *testing.T) {
	t.Parallel()
	e := setup(t, withRunner())
	id := e.createFeature("Fan-out pages")
	prd := e.waitPending(id, "prd")
	e.user("vic", auth.RoleViewer)
	origin := e.base
	ws := "ws" + e.base[len("http"):] + "/tasks/" + id + "/live"

	// What a page of each user would dial: its #live element.
	pageParams := func(user string) (int64, string) {
		s := e.session(user)
		req, _ := http.NewRequest(http.MethodGet, e.base+"/tasks/"+id, nil)
		req.AddCookie(s.cookie)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		m := regexp.MustCompile(`data-after="(\d+)" data-ik="([^"]*)"`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s's task page has no #live element", user)
		}
		n, _ := strconv.ParseInt(string(m[1]), 10, 64)
		return n, string(m[2])
	}
	var pages []*livePageConn
	open := func(name, user string, after int64, ik string, av bool) {
		s := e.session(user)
		q := url.Values{"after": {strconv.FormatInt(after, 10)}, "ik": {ik}}
		if av {
			q.Set("av", "1")
		}
		c, _, err := websocket.DefaultDialer.Dial(ws+"?"+q.Encode(),
			http.Header{"Cookie": {s.cookie.Name + "=" + s.cookie.Value}, "Origin": {origin}})
		if err != nil {
			t.Fatalf("dial %s: %v", name, err)
		}
		p := &livePageConn{name: name, conn: c, start: after, done: make(chan struct{})}
		go p.read()
		pages = append(pages, p)
	}
	seq, adaIK := pageParams(defaultUser)
	_, vicIK := pageParams("vic")
	for i := range 8 {
		open(fmt.Sprintf("%s#%d", defaultUser, i), defaultUser, seq, adaIK, false)
		open(fmt.Sprintf("vic#%d", i), "vic", seq, vicIK, false)
	}
	for i := range 3 {
		open(fmt.Sprintf("%s-from-start#%d", defaultUser, i), defaultUser, 0, "", false)
		open(fmt.Sprintf("%s-view#%d", defaultUser, i), defaultUser, seq, adaIK, true)
	}
	defer func() {
		for _, p := range pages {
			_ = p.conn.Close()
			<-p.done
		}
	}()

	if _, err := e.engine.Decide(context.Background(), id, decisionInput(prd.ID, "approve", defaultUser)); err != nil {
		t.Fatalf("decide: %v", err)
	}
	e.runner.Wake()
	e.waitPending(id, "plan")
	var last int64
	if err := e.pool.QueryRow(context.Background(), `SELECT event_seq FROM workflow_checkpoints WHERE task_id = $1`, id).Scan(&last); err != nil {
		t.Fatal(err)
	}
	if last <= seq+2 {
		t.Fatalf("the task moved from seq %d to %d only", seq, last)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, p := range pages {
		for {
			p.mu.Lock()
			meta := p.meta
			p.mu.Unlock()
			if meta >= last {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s is at seq %d, want %d", p.name, meta, last)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, p := range pages {
		p.mu.Lock()
		seqs, areas := p.seqs, p.areas
		p.mu.Unlock()
		if len(seqs) == 0 || seqs[0] != p.start+1 || seqs[len(seqs)-1] != last {
			t.Errorf("%s got seqs %v, want %d..%d", p.name, seqs, p.start+1, last)
			continue
		}
		for i := 1; i < len(seqs); i++ {
			if seqs[i] != seqs[i-1]+1 {
				t.Errorf("%s got seqs %v: not each once, in order", p.name, seqs)
				break
			}
		}
		if len(areas) == 0 {
			t.Errorf("%s was never sent the decision area", p.name)
			continue
		}
		area := areas[len(areas)-1]
		viewer := strings.HasPrefix(p.name, "vic")
		notice := strings.Contains(area, "deciding needs the approver role")
		form := strings.Contains(area, "<form")
		if notice != viewer || form == viewer {
			t.Errorf("%s's last decision area: viewer %v, has the viewer's notice %v, has a form %v", p.name, viewer, notice, form)
		}
	}
}
