package reflect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// ErrNoServices is wrapped by the error of ReadProtoset, ParseProtoset and
// CompileProtos when the descriptors declare no service to call.
var ErrNoServices = errors.New("reflect: the descriptors declare no service")

// ReadProtoset reads a FileDescriptorSet file, as
// `protoc --descriptor_set_out=FILE --include_imports` writes it, and
// returns the registry of every service it declares. Imports missing from
// the set are taken from the well-known types linked into the program, so a
// set written without --include_imports works when it imports only
// google/protobuf/*.proto. Comments appear in the OpenRPC document when the
// set was written with --include_source_info.
func ReadProtoset(path string) (*Registry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reflect: read protoset: %w", err)
	}
	reg, err := ParseProtoset(b)
	if err != nil {
		return nil, fmt.Errorf("%w (protoset %s)", err, path)
	}
	return reg, nil
}

// ParseProtoset is ReadProtoset on the bytes of a FileDescriptorSet.
func ParseProtoset(b []byte) (*Registry, error) {
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("reflect: parse protoset: %w", err)
	}
	return registryOfSet(&set)
}

// CompileProtos parses and links .proto sources with protocompile and
// returns the registry of every service they declare. Each file is found
// in importPaths (none means the current directory); a file given by a path
// under one of them is taken relative to it, as protoc does. The
// well-known google/protobuf/*.proto files are always available. Comments
// are kept, so they appear in the OpenRPC document.
func CompileProtos(ctx context.Context, importPaths, files []string) (*Registry, error) {
	if len(files) == 0 {
		return nil, errors.New("reflect: no .proto files to compile")
	}
	if len(importPaths) == 0 {
		importPaths = []string{"."}
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = relativeToImportPath(f, importPaths)
	}
	compiler := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: importPaths}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	linked, err := compiler.Compile(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("reflect: compile .proto files: %w", err)
	}
	set := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	for _, fd := range linked {
		appendWithImports(set, fd, seen)
	}
	return registryOfSet(set)
}

// relativeToImportPath returns file relative to the first import path that
// contains it, or file unchanged.
func relativeToImportPath(file string, importPaths []string) string {
	abs, err := filepath.Abs(file)
	if err != nil {
		return file
	}
	for _, dir := range importPaths {
		d, err := filepath.Abs(dir)
		if err != nil {
			continue
		}
		rel, err := filepath.Rel(d, abs)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return filepath.ToSlash(rel)
		}
	}
	return filepath.ToSlash(file)
}

// appendWithImports adds fd's imports and then fd to set, each path once.
func appendWithImports(set *descriptorpb.FileDescriptorSet, fd protoreflect.FileDescriptor, seen map[string]bool) {
	if seen[fd.Path()] {
		return
	}
	seen[fd.Path()] = true
	imports := fd.Imports()
	for i := range imports.Len() {
		appendWithImports(set, imports.Get(i).FileDescriptor, seen)
	}
	set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
}

// registryOfSet links the files of set into a private protoregistry.Files,
// imports before importers, and builds the registry of their services.
func registryOfSet(set *descriptorpb.FileDescriptorSet) (*Registry, error) {
	byPath := make(map[string]*descriptorpb.FileDescriptorProto, len(set.GetFile()))
	for _, f := range set.GetFile() {
		if _, dup := byPath[f.GetName()]; dup {
			return nil, fmt.Errorf("reflect: file %s appears twice in the descriptor set", f.GetName())
		}
		byPath[f.GetName()] = f
	}
	files := new(protoregistry.Files)
	linking := map[string]bool{}
	var link func(path string) error
	link = func(path string) error {
		if _, err := files.FindFileByPath(path); err == nil {
			return nil
		}
		fdp, ok := byPath[path]
		if !ok {
			// Not in the set: a well-known file linked into the program.
			fd, err := protoregistry.GlobalFiles.FindFileByPath(path)
			if err != nil || !strings.HasPrefix(path, "google/protobuf/") {
				return fmt.Errorf("reflect: the descriptor set lacks %s (write it with --include_imports)", path)
			}
			return registerFile(files, fd)
		}
		if linking[path] {
			return fmt.Errorf("reflect: import cycle through %s", path)
		}
		linking[path] = true
		for _, dep := range fdp.GetDependency() {
			if err := link(dep); err != nil {
				return err
			}
		}
		fd, err := protodesc.NewFile(fdp, files)
		if err != nil {
			return fmt.Errorf("reflect: link %s: %w", path, err)
		}
		return files.RegisterFile(fd)
	}
	for _, f := range set.GetFile() {
		if err := link(f.GetName()); err != nil {
			return nil, err
		}
	}
	reg, err := NewRegistry(files)
	if err != nil {
		return nil, err
	}
	if len(reg.Services()) == 0 {
		return nil, ErrNoServices
	}
	return reg, nil
}

// registerFile adds fd and, before it, its transitive imports to files. A
// path already in files is skipped, so shared imports are registered once.
func registerFile(files *protoregistry.Files, fd protoreflect.FileDescriptor) error {
	if _, err := files.FindFileByPath(fd.Path()); err == nil {
		return nil
	}
	imports := fd.Imports()
	for i := range imports.Len() {
		imp := imports.Get(i)
		if imp.IsPlaceholder() {
			return fmt.Errorf("%s imports missing file %s", fd.Path(), imp.Path())
		}
		if err := registerFile(files, imp.FileDescriptor); err != nil {
			return err
		}
	}
	return files.RegisterFile(fd)
}
