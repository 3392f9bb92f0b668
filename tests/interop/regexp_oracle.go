// The oracle for cnibox's regexp matcher (src/util/regex.rs): Go's regexp, as the reference
// tuning plugin uses it (regexp.MatchString). Reads a JSON array of {"p": pattern, "t":
// [texts]} on stdin; writes a JSON array of {"err": message} (the pattern does not compile)
// or {"m": [whether each text matches]}.
package main

import (
	"encoding/json"
	"os"
	"regexp"
)

type query struct {
	P string   `json:"p"`
	T []string `json:"t"`
}

type answer struct {
	Err *string `json:"err,omitempty"`
	M   []bool  `json:"m,omitempty"`
}

func main() {
	var queries []query
	if err := json.NewDecoder(os.Stdin).Decode(&queries); err != nil {
		panic(err)
	}
	answers := make([]answer, len(queries))
	for i, q := range queries {
		re, err := regexp.Compile(q.P)
		if err != nil {
			msg := err.Error()
			answers[i].Err = &msg
			continue
		}
		answers[i].M = make([]bool, len(q.T))
		for j, t := range q.T {
			answers[i].M[j] = re.MatchString(t)
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(answers); err != nil {
		panic(err)
	}
}
