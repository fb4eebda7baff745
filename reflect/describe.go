package reflect

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	// The well-known types' files, which describe files may refer to
	// without the backend serving them: they are in GlobalFiles once
	// linked in.
	_ "google.golang.org/protobuf/types/known/anypb"
	_ "google.golang.org/protobuf/types/known/apipb"
	_ "google.golang.org/protobuf/types/known/durationpb"
	_ "google.golang.org/protobuf/types/known/emptypb"
	_ "google.golang.org/protobuf/types/known/fieldmaskpb"
	_ "google.golang.org/protobuf/types/known/sourcecontextpb"
	_ "google.golang.org/protobuf/types/known/structpb"
	_ "google.golang.org/protobuf/types/known/timestamppb"
	_ "google.golang.org/protobuf/types/known/typepb"
	_ "google.golang.org/protobuf/types/known/wrapperspb"
)

// wellKnownPrefix is the path of the files the bridge has its own copies
// of, used when the backend does not serve them.
const wellKnownPrefix = "google/protobuf/"

// Bounds against a backend answering without end, or with descriptors
// made to make the repair slow: resolving a type name tries every
// enclosing scope, so names are bounded in length and scopes in depth.
const (
	maxFiles       = 10000  // files taken from one backend's answers
	maxImportDepth = 1024   // length of a chain of imports
	maxQuestions   = 100000 // requests to one backend in one discovery
	maxNameLength  = 1024   // bytes of a full name or a type name
	maxScopeDepth  = 32     // components of a full name (package and nesting)
)

// describer turns the FileDescriptorProtos a backend's reflection gives
// into file descriptors, repairing what servers get wrong, as
// @grpc/reflection 1.0.4 for Node does (grpc-node issue 3034):
//
//   - the bridge's own copies of the well-known types replace the
//     backend's (wellKnownOf): the same messages on the wire, and
//     described as protoc does, where 1.0.4's google.protobuf.Struct
//     does not build;
//   - a file that uses a type of another file without listing that file
//     among its dependencies gets the dependency added, the file being
//     one the backend gave or gives when asked for the type, or the
//     bridge's own copy of a well-known type's file; a dependency no one
//     has is dropped, in case nothing of it is used;
//   - every type name a file uses is made full, resolved as protobuf
//     does (relative names from the innermost scope outwards);
//   - map entries named otherwise than protobuf derives from their field
//     get that name (renameMapEntries), and a field alone in a oneof
//     named after it, as protoc makes of proto3 optional, gets its
//     proto3_optional flag back (restoreProto3Optional): neither changes
//     a field's number or type, so the wire format is the backend's.
//
// A file that still does not build is a *fileError, and so is every file
// needing it. The repair depends only on the backend's answers, in the
// order they come; it keeps to the bounds below (a file beyond them is a
// *fileError) and never trusts an index or a name of the backend's.
type describer struct {
	c       fileSource
	pool    map[string]*descriptorpb.FileDescriptorProto // every file given, by path
	symbols map[protoreflect.FullName][]string           // the paths of the pool's files declaring each name
	asked   map[string]bool                              // symbols ("s:") and files ("f:") asked for already, well-known types replaced ("w:")
	askedN  int                                          // requests made, up to maxQuestions
	files   *protoregistry.Files                         // the files built
	failed  map[string]*fileError
	open    []string // the files being built, each importing the next, for cycles
	repairs []string // what was repaired, a sentence each, in order
}

// fileSource is the reflection client's part describer uses; tests and
// fuzzing give it answers of their own. Both methods return the
// serialized files of the answer, or an *answerError.
type fileSource interface {
	fileContainingSymbol(name string) ([][]byte, error)
	fileByFilename(path string) ([][]byte, error)
}

// fileError says why a file cannot be described: Reason is a sentence for
// operators, Err the details.
type fileError struct {
	Reason string
	Err    error
}

func newDescriber(c fileSource) *describer {
	return &describer{
		c:       c,
		pool:    make(map[string]*descriptorpb.FileDescriptorProto),
		symbols: make(map[protoreflect.FullName][]string),
		asked:   make(map[string]bool),
		files:   new(protoregistry.Files),
		failed:  make(map[string]*fileError),
	}
}

// add puts the files of an answer into the pool, the bridge's copies of
// the well-known types standing for the backend's (wellKnownOf); a path
// already there keeps its first file.
func (d *describer) add(answer [][]byte) error {
	for _, b := range answer {
		fdp := new(descriptorpb.FileDescriptorProto)
		if err := proto.Unmarshal(b, fdp); err != nil {
			return fmt.Errorf("the backend sent a file descriptor that does not decode: %w", err)
		}
		own, rest := wellKnownOf(fdp)
		for _, path := range own {
			if _, err := d.wellKnown(path); err != nil {
				return err
			}
		}
		if path := fdp.GetName(); len(own) > 0 && !slices.Contains(own, path) && !d.asked["w:"+path] {
			// (a file at a well-known path is the bridge's: not worth saying)
			d.asked["w:"+path] = true
			d.repairs = append(d.repairs, fmt.Sprintf("%s: the bridge's %s stand for the well-known types it declares",
				path, strings.Join(own, ", ")))
		}
		if rest == nil {
			continue
		}
		if err := d.put(rest); err != nil {
			return err
		}
	}
	return nil
}

func (d *describer) put(fdp *descriptorpb.FileDescriptorProto) error {
	path := fdp.GetName()
	if _, ok := d.pool[path]; ok {
		return nil
	}
	if len(d.pool) >= maxFiles {
		return fmt.Errorf("the backend describes more than %d files", maxFiles)
	}
	d.pool[path] = fdp
	if why := oversized(fdp); why != "" {
		// Not indexed but for its services, whose skip gives the reason.
		d.failed[path] = &fileError{Reason: fmt.Sprintf("the backend's descriptor of %s is beyond the bridge's bounds: %s", path, why), Err: errors.New(why)}
		if pkg := fdp.GetPackage(); len(pkg) <= maxNameLength {
			for _, sd := range fdp.GetService() {
				if len(sd.GetName()) <= maxNameLength {
					name := join(protoreflect.FullName(pkg), sd.GetName())
					d.symbols[name] = append(d.symbols[name], path)
				}
			}
		}
		return nil
	}
	for name := range declarations(fdp) {
		d.symbols[name] = append(d.symbols[name], path)
	}
	return nil
}

// askSymbol asks the backend once for the files declaring name and adds
// them to the pool. Only a broken stream or a transient error answer is
// an error.
func (d *describer) askSymbol(name string) error {
	if d.asked["s:"+name] {
		return nil
	}
	d.asked["s:"+name] = true
	if err := d.count(); err != nil {
		return err
	}
	answer, err := d.c.fileContainingSymbol(name)
	return d.took(answer, err)
}

// count counts a request to the backend, an error past maxQuestions.
func (d *describer) count() error {
	if d.askedN >= maxQuestions {
		return fmt.Errorf("describing the backend's services takes more than %d reflection requests", maxQuestions)
	}
	d.askedN++
	return nil
}

// askFile is askSymbol for a file's path.
func (d *describer) askFile(path string) error {
	if d.asked["f:"+path] {
		return nil
	}
	d.asked["f:"+path] = true
	if err := d.count(); err != nil {
		return err
	}
	answer, err := d.c.fileByFilename(path)
	return d.took(answer, err)
}

func (d *describer) took(answer [][]byte, err error) error {
	if ae, ok := errors.AsType[*answerError](err); ok && !ae.transient() {
		return nil // the backend does not know it
	}
	if err != nil {
		return err
	}
	return d.add(answer)
}

// wellKnown puts the bridge's copy of the well-known types' file at path
// into the pool, reporting whether there is one.
func (d *describer) wellKnown(path string) (bool, error) {
	if !strings.HasPrefix(path, wellKnownPrefix) {
		return false, nil
	}
	fd, err := protoregistry.GlobalFiles.FindFileByPath(path)
	if err != nil {
		return false, nil
	}
	return true, d.put(protodesc.ToFileDescriptorProto(fd))
}

// file returns the pool's file at path, taking the bridge's copy of a
// well-known type's file, else asking the backend for it; nil when no one
// has it.
func (d *describer) file(path string) (*descriptorpb.FileDescriptorProto, error) {
	if fdp, ok := d.pool[path]; ok {
		return fdp, nil
	}
	if ok, err := d.wellKnown(path); err != nil || ok {
		return d.pool[path], err // the bridge's copy stands for the backend's anyway
	}
	if err := d.askFile(path); err != nil {
		return nil, err
	}
	return d.pool[path], nil
}

// definer returns the first of names someone declares and the path of a
// file declaring it, tried in order: the pool's files or the bridge's
// well-known types, then the backend's answer for each; "" when no one
// declares any.
func (d *describer) definer(names []protoreflect.FullName) (protoreflect.FullName, string, error) {
	for _, n := range names {
		if paths := d.symbols[n]; len(paths) > 0 {
			return n, paths[0], nil
		}
		if path := wellKnownPath(n); path != "" {
			if _, err := d.wellKnown(path); err != nil {
				return "", "", err
			}
			if paths := d.symbols[n]; len(paths) > 0 {
				return n, paths[0], nil
			}
		}
	}
	for _, n := range names {
		if err := d.askSymbol(string(n)); err != nil {
			return "", "", err
		}
		if paths := d.symbols[n]; len(paths) > 0 {
			return n, paths[0], nil
		}
	}
	return "", "", nil
}

// serviceFile returns the path of the file declaring service, asking the
// backend for it when no file of the pool does; "" when none does.
func (d *describer) serviceFile(service string) (string, error) {
	name := protoreflect.FullName(service)
	if len(d.symbols[name]) == 0 {
		if err := d.askSymbol(service); err != nil {
			return "", err
		}
	}
	if paths := d.symbols[name]; len(paths) > 0 {
		return paths[0], nil
	}
	return "", nil
}

// build returns the descriptor of the pool's file at path, building and
// registering it and, first, the files it needs. A file that cannot be
// described is a *fileError (remembered); an error is the backend's.
func (d *describer) build(path string, depth int) (protoreflect.FileDescriptor, *fileError, error) {
	if fd, err := d.files.FindFileByPath(path); err == nil {
		return fd, nil, nil
	}
	if fe := d.failed[path]; fe != nil {
		return nil, fe, nil
	}
	if i := slices.Index(d.open, path); i >= 0 {
		cycle := strings.Join(append(slices.Clone(d.open[i:]), path), " → ")
		return nil, &fileError{Reason: fmt.Sprintf("%s imports itself (%s)", path, cycle), Err: fmt.Errorf("import cycle %s", cycle)}, nil
	}
	if depth > maxImportDepth {
		return nil, &fileError{Reason: fmt.Sprintf("%s has more than %d levels of imports", path, maxImportDepth), Err: errors.New("imports too deep")}, nil
	}
	d.open = append(d.open, path)
	defer func() { d.open = d.open[:len(d.open)-1] }()
	fdp := proto.CloneOf(d.pool[path])
	missing, err := d.keepAvailableDeps(fdp)
	if err != nil {
		return nil, nil, err
	}
	unresolved, added, err := d.repair(fdp)
	if err != nil {
		return nil, nil, err
	}
	renamed := renameMapEntries(fdp)
	optional := restoreProto3Optional(fdp)
	fail := func(fe *fileError) (protoreflect.FileDescriptor, *fileError, error) {
		d.failed[path] = fe
		return nil, fe, nil
	}
	if len(unresolved) > 0 {
		names := strings.Join(unresolved, ", ")
		reason := fmt.Sprintf("%s refers to %s, which the backend's reflection does not describe", path, names)
		if len(missing) > 0 {
			reason += fmt.Sprintf(" (it imports %s, which the backend does not serve)", strings.Join(missing, ", "))
		}
		return fail(&fileError{Reason: reason, Err: fmt.Errorf("%s: unresolvable names %s", path, names)})
	}
	for _, dep := range fdp.GetDependency() {
		if _, fe, err := d.build(dep, depth+1); err != nil {
			return nil, nil, err
		} else if fe != nil {
			return fail(fe)
		}
	}
	fd, err := protodesc.NewFile(fdp, d.files)
	if err == nil {
		err = d.files.RegisterFile(fd)
	}
	if err != nil {
		return fail(&fileError{Reason: fmt.Sprintf("the backend's descriptor of %s is invalid", path), Err: err})
	}
	for _, r := range []struct {
		what  string
		items []string
	}{
		{"imports what it does not list", added},
		{"no longer imports what the backend does not serve", missing},
		{"map entries renamed", renamed},
		{"proto3 optional again", optional},
	} {
		if len(r.items) > 0 {
			d.repairs = append(d.repairs, fmt.Sprintf("%s: %s: %s", path, r.what, strings.Join(r.items, ", ")))
		}
	}
	return fd, nil, nil
}

// keepAvailableDeps drops from fdp the dependencies no one has, returning
// their paths; the public and weak dependency indexes follow.
func (d *describer) keepAvailableDeps(fdp *descriptorpb.FileDescriptorProto) ([]string, error) {
	var missing []string
	var deps []string
	renumber := make(map[int32]int32)
	for i, dep := range fdp.GetDependency() {
		dfp, err := d.file(dep)
		if err != nil {
			return nil, err
		}
		if dfp == nil {
			missing = append(missing, dep)
			continue
		}
		renumber[int32(i)] = int32(len(deps))
		deps = append(deps, dep)
	}
	if len(missing) == 0 {
		return nil, nil
	}
	keep := func(indexes []int32) []int32 {
		var out []int32
		for _, i := range indexes {
			if j, ok := renumber[i]; ok {
				out = append(out, j)
			}
		}
		return out
	}
	fdp.Dependency = deps
	fdp.PublicDependency = keep(fdp.PublicDependency)
	fdp.WeakDependency = keep(fdp.WeakDependency)
	return missing, nil
}

// repair makes every type name fdp uses full, resolved as protodesc
// would once the dependencies are there, adding a dependency on the file
// declaring each type it refers to but neither declares nor imports; it
// returns the references no one declares, as written, and the
// dependencies added.
func (d *describer) repair(fdp *descriptorpb.FileDescriptorProto) (unresolved, added []string, err error) {
	local := declarations(fdp)
	visible := make(map[string]bool)
	for _, dep := range fdp.GetDependency() {
		d.addVisible(visible, dep, 0)
	}
	// resolve mirrors protodesc: in each scope from the innermost, the
	// file's own declarations, then those of the files it imports.
	resolve := func(cands []protoreflect.FullName) (protoreflect.FullName, bool) {
		for _, c := range cands {
			if local[c] {
				return c, true
			}
			for _, p := range d.symbols[c] {
				if visible[p] {
					return c, true
				}
			}
		}
		return "", false
	}
	for _, ref := range references(fdp) {
		name := ref.name()
		cands := candidates(ref.scope, name)
		if len(cands) == 0 {
			continue // an empty or malformed name is protodesc's to refuse
		}
		if full, ok := resolve(cands); ok {
			ref.set("." + string(full))
			continue
		}
		full, path, err := d.definer(cands)
		if err != nil {
			return nil, nil, err
		}
		if path == "" || path == fdp.GetName() {
			if !slices.Contains(unresolved, strings.TrimPrefix(name, ".")) {
				unresolved = append(unresolved, strings.TrimPrefix(name, "."))
			}
			continue
		}
		ref.set("." + string(full))
		fdp.Dependency = append(fdp.Dependency, path)
		added = append(added, path)
		d.addVisible(visible, path, 0)
	}
	return unresolved, added, nil
}

// addVisible marks path and the files it imports publicly, transitively,
// as visible.
func (d *describer) addVisible(visible map[string]bool, path string, depth int) {
	if visible[path] || depth > maxImportDepth {
		return
	}
	visible[path] = true
	fdp := d.pool[path]
	deps := fdp.GetDependency()
	for _, i := range fdp.GetPublicDependency() {
		if i >= 0 && int(i) < len(deps) {
			d.addVisible(visible, deps[i], depth+1)
		}
	}
}

// reference is a type name a file uses, where it is (to rewrite it) and
// the scope it is resolved in.
type reference struct {
	scope protoreflect.FullName
	at    **string
}

func (r reference) name() string {
	if *r.at == nil {
		return ""
	}
	return **r.at
}
func (r reference) set(s string) { *r.at = proto.String(s) }

// references lists the type names fdp uses: field types, extendees and
// method input and output types.
func references(fdp *descriptorpb.FileDescriptorProto) []reference {
	var refs []reference
	pkg := protoreflect.FullName(fdp.GetPackage())
	field := func(scope protoreflect.FullName, f *descriptorpb.FieldDescriptorProto) {
		if f.GetTypeName() != "" {
			refs = append(refs, reference{scope, &f.TypeName})
		}
		if f.GetExtendee() != "" {
			refs = append(refs, reference{scope, &f.Extendee})
		}
	}
	var message func(scope protoreflect.FullName, m *descriptorpb.DescriptorProto)
	message = func(scope protoreflect.FullName, m *descriptorpb.DescriptorProto) {
		name := join(scope, m.GetName())
		for _, f := range m.GetField() {
			field(name, f)
		}
		for _, x := range m.GetExtension() {
			field(name, x)
		}
		for _, n := range m.GetNestedType() {
			message(name, n)
		}
	}
	for _, m := range fdp.GetMessageType() {
		message(pkg, m)
	}
	for _, x := range fdp.GetExtension() {
		field(pkg, x)
	}
	for _, s := range fdp.GetService() {
		name := join(pkg, s.GetName())
		for _, m := range s.GetMethod() {
			if m.GetInputType() != "" {
				refs = append(refs, reference{name, &m.InputType})
			}
			if m.GetOutputType() != "" {
				refs = append(refs, reference{name, &m.OutputType})
			}
		}
	}
	return refs
}

// declarations returns the full names of the messages, enums, extensions
// and services fdp declares, nested ones included.
func declarations(fdp *descriptorpb.FileDescriptorProto) map[protoreflect.FullName]bool {
	names := make(map[protoreflect.FullName]bool)
	pkg := protoreflect.FullName(fdp.GetPackage())
	var message func(scope protoreflect.FullName, m *descriptorpb.DescriptorProto)
	message = func(scope protoreflect.FullName, m *descriptorpb.DescriptorProto) {
		name := join(scope, m.GetName())
		names[name] = true
		for _, e := range m.GetEnumType() {
			names[join(name, e.GetName())] = true
		}
		for _, x := range m.GetExtension() {
			names[join(name, x.GetName())] = true
		}
		for _, n := range m.GetNestedType() {
			message(name, n)
		}
	}
	for _, m := range fdp.GetMessageType() {
		message(pkg, m)
	}
	for _, e := range fdp.GetEnumType() {
		names[join(pkg, e.GetName())] = true
	}
	for _, x := range fdp.GetExtension() {
		names[join(pkg, x.GetName())] = true
	}
	for _, s := range fdp.GetService() {
		names[join(pkg, s.GetName())] = true
	}
	return names
}

// candidates returns the full names ref may mean in scope, in the order
// protobuf tries them: a name with a leading dot is already full; another
// is looked up in scope, then in each enclosing scope.
func candidates(scope protoreflect.FullName, ref string) []protoreflect.FullName {
	if full, ok := strings.CutPrefix(ref, "."); ok {
		if full == "" {
			return nil
		}
		return []protoreflect.FullName{protoreflect.FullName(full)}
	}
	if ref == "" {
		return nil
	}
	var out []protoreflect.FullName
	for {
		out = append(out, join(scope, ref))
		if scope == "" {
			return out
		}
		scope = scope.Parent()
	}
}

func join[S ~string](scope protoreflect.FullName, name S) protoreflect.FullName {
	if scope == "" {
		return protoreflect.FullName(name)
	}
	return scope + "." + protoreflect.FullName(name)
}
