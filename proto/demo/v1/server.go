package demov1

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Server is an in-memory NotesServer, safe for concurrent use. Create it
// with NewServer; it starts with one note, "n1".
type Server struct {
	UnimplementedNotesServer

	mu      sync.Mutex
	notes   map[string]*Note
	nextID  int
	counter int64
	changed chan struct{} // closed and replaced whenever a note is added
}

// NewServer returns a Server holding the welcome note "n1" and a counter of 0.
func NewServer() *Server {
	s := &Server{notes: make(map[string]*Note), changed: make(chan struct{})}
	s.add(&Note{
		Title:    "Welcome",
		Body:     "This note comes with the demo. Try GetNote, CreateNote and ListNotes.",
		Tags:     []string{"intro"},
		Labels:   map[string]string{"lang": "en"},
		Priority: Priority_PRIORITY_NORMAL,
		Author:   &Author{Name: "Ada"},
	})
	return s
}

// add assigns an id and creation time to n and stores it. s.mu must be held
// or s not yet shared.
func (s *Server) add(n *Note) *Note {
	s.nextID++
	n.Id = "n" + strconv.Itoa(s.nextID)
	n.CreatedAt = timestamppb.Now()
	n.Views = 0
	s.notes[n.Id] = n
	close(s.changed)
	s.changed = make(chan struct{})
	return proto.CloneOf(n)
}

// CreateNote stores req.Note under a new id. A note without a title is
// INVALID_ARGUMENT with a google.rpc.BadRequest detail.
func (s *Server) CreateNote(_ context.Context, req *CreateNoteRequest) (*Note, error) {
	if req.GetNote().GetTitle() == "" {
		return nil, badRequest("note.title", "must not be empty", "note title is required")
	}
	n := proto.CloneOf(req.GetNote())
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.add(n), nil
}

// GetNote returns the note with req.Id and counts the view. An unknown id
// is NOT_FOUND with a google.rpc.ErrorInfo detail.
func (s *Server) GetNote(_ context.Context, req *GetNoteRequest) (*Note, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.notes[req.GetId()]
	if !ok {
		return nil, notFound(req.GetId())
	}
	n.Views++
	return proto.CloneOf(n), nil
}

// ListNotes returns, ordered by id, the notes that carry every tag in
// req.Tags (all notes when none is given).
func (s *Server) ListNotes(_ context.Context, req *ListNotesRequest) (*ListNotesResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &ListNotesResponse{}
	for _, n := range s.notes {
		if hasAll(n.GetTags(), req.GetTags()) {
			resp.Notes = append(resp.Notes, proto.CloneOf(n))
		}
	}
	slices.SortFunc(resp.Notes, func(a, b *Note) int { return compareIDs(a.GetId(), b.GetId()) })
	resp.Total = int64(len(resp.Notes))
	return resp, nil
}

// Increment adds req.Delta to the shared counter and returns the new value.
func (s *Server) Increment(_ context.Context, req *IncrementRequest) (*Counter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counter += req.GetDelta()
	return &Counter{Value: s.counter}, nil
}

// GetCounter returns the shared counter.
func (s *Server) GetCounter(context.Context, *GetCounterRequest) (*Counter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &Counter{Value: s.counter}, nil
}

// WatchNotes sends, ordered by id, the notes that carry every tag in
// req.Tags. With req.Follow it then waits for new notes and sends each
// matching one, until the call is cancelled.
func (s *Server) WatchNotes(req *WatchNotesRequest, stream grpc.ServerStreamingServer[Note]) error {
	ctx := stream.Context()
	var last string // the id of the last note sent
	for {
		notes, changed := s.notesAfter(last, req.GetTags())
		for _, n := range notes {
			if err := stream.Send(n); err != nil {
				return err
			}
			last = n.GetId()
		}
		if !req.GetFollow() {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// notesAfter returns, ordered by id, copies of the notes after id that
// carry all tags, and a channel closed at the next change.
func (s *Server) notesAfter(id string, tags []string) ([]*Note, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var notes []*Note
	for _, n := range s.notes {
		if (id == "" || compareIDs(n.GetId(), id) > 0) && hasAll(n.GetTags(), tags) {
			notes = append(notes, proto.CloneOf(n))
		}
	}
	slices.SortFunc(notes, func(a, b *Note) int { return compareIDs(a.GetId(), b.GetId()) })
	return notes, s.changed
}

// ImportNotes creates a note for every request, in order, and returns
// their ids. A note without a title stops the import with
// INVALID_ARGUMENT; the notes before it stay.
func (s *Server) ImportNotes(stream grpc.ClientStreamingServer[CreateNoteRequest, ImportNotesResponse]) error {
	resp := &ImportNotesResponse{}
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			resp.Count = int64(len(resp.Ids))
			return stream.SendAndClose(resp)
		}
		if err != nil {
			return err
		}
		n, err := s.CreateNote(stream.Context(), req)
		if err != nil {
			return err
		}
		resp.Ids = append(resp.Ids, n.GetId())
	}
}

// TagNotes adds req.Tag to the note req.Id for every request and sends the
// updated note. An unknown id ends the stream with NOT_FOUND.
func (s *Server) TagNotes(stream grpc.BidiStreamingServer[TagNoteRequest, Note]) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		n, err := s.tag(req.GetId(), req.GetTag())
		if err != nil {
			return err
		}
		if err := stream.Send(n); err != nil {
			return err
		}
	}
}

// tag adds tag to the note id, unless it is there already, and returns a
// copy of the note.
func (s *Server) tag(id, tag string) (*Note, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.notes[id]
	if !ok {
		return nil, notFound(id)
	}
	if tag != "" && !slices.Contains(n.Tags, tag) {
		n.Tags = append(n.Tags, tag)
	}
	return proto.CloneOf(n), nil
}

func hasAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// compareIDs orders "n2" before "n10".
func compareIDs(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// notFound is the NOT_FOUND status of an unknown note id, with a
// google.rpc.ErrorInfo detail.
func notFound(id string) error {
	st := status.New(codes.NotFound, fmt.Sprintf("note %q not found", id))
	return withDetails(st, &errdetails.ErrorInfo{
		Reason:   "NOTE_NOT_FOUND",
		Domain:   "demo.v1",
		Metadata: map[string]string{"id": id},
	})
}

func badRequest(field, desc, msg string) error {
	return withDetails(status.New(codes.InvalidArgument, msg), &errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: desc}},
	})
}

// withDetails attaches details to st; should that fail, st goes out bare.
func withDetails(st *status.Status, details ...protoadapt.MessageV1) error {
	if d, err := st.WithDetails(details...); err == nil {
		return d.Err()
	}
	return st.Err()
}
