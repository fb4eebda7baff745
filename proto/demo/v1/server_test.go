package demov1_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	demov1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/demo/v1"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
)

func newClient(t *testing.T) demov1.NotesClient {
	t.Helper()
	conn := testserver.Start(t, testserver.Options{Services: []testserver.Service{testserver.Notes}, Reflection: testserver.ReflectionNone}).Conn()
	return demov1.NewNotesClient(conn)
}

func TestSeededNote(t *testing.T) {
	c := newClient(t)
	for want := int64(1); want <= 2; want++ {
		n, err := c.GetNote(t.Context(), &demov1.GetNoteRequest{Id: "n1"})
		if err != nil {
			t.Fatal(err)
		}
		if n.GetTitle() != "Welcome" || n.GetAuthor().GetName() != "Ada" || n.GetLabels()["lang"] != "en" ||
			n.GetPriority() != demov1.Priority_PRIORITY_NORMAL || !slices.Equal(n.GetTags(), []string{"intro"}) ||
			n.GetCreatedAt() == nil {
			t.Errorf("got %v, want the welcome note", n)
		}
		if n.GetViews() != want {
			t.Errorf("got views %d, want %d", n.GetViews(), want)
		}
	}
}

func TestCreateNote(t *testing.T) {
	c := newClient(t)
	tests := []struct {
		name      string
		note      *demov1.Note
		wantID    string
		wantCode  codes.Code
		wantField string
	}{
		{name: "ok", note: &demov1.Note{Title: "t", Id: "ignored", Views: 9}, wantID: "n2"},
		{name: "no title", note: &demov1.Note{Body: "b"}, wantCode: codes.InvalidArgument, wantField: "note.title"},
		{name: "no note", wantCode: codes.InvalidArgument, wantField: "note.title"},
		{name: "next id", note: &demov1.Note{Title: "u"}, wantID: "n3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.CreateNote(t.Context(), &demov1.CreateNoteRequest{Note: tt.note})
			if tt.wantCode != codes.OK {
				st := status.Convert(err)
				if st.Code() != tt.wantCode || st.Message() != "note title is required" {
					t.Fatalf("got %v, want %v note title is required", err, tt.wantCode)
				}
				br := detailOf[*errdetails.BadRequest](t, st)
				if len(br.GetFieldViolations()) != 1 || br.GetFieldViolations()[0].GetField() != tt.wantField {
					t.Errorf("got %v, want one violation of %s", br, tt.wantField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.GetId() != tt.wantID || got.GetViews() != 0 || got.GetCreatedAt() == nil || got.GetTitle() != tt.note.GetTitle() {
				t.Errorf("got %v, want id %s, views 0 and a created_at", got, tt.wantID)
			}
		})
	}
}

func TestGetNoteNotFound(t *testing.T) {
	_, err := newClient(t).GetNote(t.Context(), &demov1.GetNoteRequest{Id: "nope"})
	st := status.Convert(err)
	if st.Code() != codes.NotFound || st.Message() != `note "nope" not found` {
		t.Fatalf("got %v, want NotFound note \"nope\" not found", err)
	}
	want := &errdetails.ErrorInfo{Reason: "NOTE_NOT_FOUND", Domain: "demo.v1", Metadata: map[string]string{"id": "nope"}}
	if got := detailOf[*errdetails.ErrorInfo](t, st); !proto.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestListNotes(t *testing.T) {
	c := newClient(t)
	for i := 2; i <= 11; i++ {
		tags := []string{"all"}
		if i%2 == 0 {
			tags = append(tags, "even")
		}
		if _, err := c.CreateNote(t.Context(), &demov1.CreateNoteRequest{Note: &demov1.Note{Title: fmt.Sprint(i), Tags: tags}}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		tags []string
		want []string
	}{
		{name: "no filter", want: []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10", "n11"}},
		{name: "one tag", tags: []string{"intro"}, want: []string{"n1"}},
		{name: "all tags", tags: []string{"all", "even"}, want: []string{"n2", "n4", "n6", "n8", "n10"}},
		{name: "no match", tags: []string{"intro", "even"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := c.ListNotes(t.Context(), &demov1.ListNotesRequest{Tags: tt.tags})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, n := range resp.GetNotes() {
				got = append(got, n.GetId())
			}
			if !slices.Equal(got, tt.want) || resp.GetTotal() != int64(len(tt.want)) {
				t.Errorf("got %v (total %d), want %v", got, resp.GetTotal(), tt.want)
			}
		})
	}
}

func TestCounterConcurrent(t *testing.T) {
	c := newClient(t)
	const n = 20
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, err := c.Increment(t.Context(), &demov1.IncrementRequest{Delta: 2}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, err := c.GetCounter(t.Context(), &demov1.GetCounterRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetValue() != 2*n {
		t.Errorf("got %d, want %d", got.GetValue(), 2*n)
	}
}

// detailOf returns the only detail of st, which must be a T.
func detailOf[T proto.Message](t *testing.T, st *status.Status) T {
	t.Helper()
	ds := st.Details()
	if len(ds) != 1 {
		t.Fatalf("got %d details, want 1", len(ds))
	}
	d, ok := ds[0].(T)
	if !ok {
		t.Fatalf("got detail %T, want %T", ds[0], *new(T))
	}
	return d
}
