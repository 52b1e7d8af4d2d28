package main

import (
	"fmt"
	"os"
	"strings"
)

// secretSource is a credential given either as a value (flag or HERALD_* variable, never
// printed) or as a file that holds it, so that it need not sit in the environment (a mounted
// Kubernetes or Docker secret). A trailing newline of the file is not part of the secret.
type secretSource struct {
	name  string
	value string
	file  string
}

// register registers --NAME (secret) and --NAME-file.
func (s *secretSource) register(f *envFlags, name, usage string) {
	s.name = name
	f.secret(&s.value, name, usage)
	f.String(&s.file, name+"-file", "", "file that holds "+name+" (instead of --"+name+")")
}

func (s *secretSource) set() bool { return s.value != "" || s.file != "" }

// get returns the secret. Errors name the flag and the file, never the secret.
func (s *secretSource) get() (string, error) {
	if s.value != "" && s.file != "" {
		return "", fmt.Errorf("--%s and --%s-file: give one, not both", s.name, s.name)
	}
	if s.file == "" {
		return s.value, nil
	}
	b, err := os.ReadFile(s.file)
	if err != nil {
		return "", fmt.Errorf("--%s-file: %w", s.name, err)
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", fmt.Errorf("--%s-file: %s is empty", s.name, s.file)
	}
	return v, nil
}
