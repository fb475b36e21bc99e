package databases

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrStatement refuses a statement a WebAssembly worker may not run on the runtime's own
// connection to its local database.
var ErrStatement = errors.New("statement refused")

// safePragmas are the pragmas a worker may run or read as table-valued functions: they read
// the schema or set what concerns its own rows alone. The others could lift its limit
// (max_page_count), take the runtime's memory (cache_size) or reach other files.
var safePragmas = []string{"foreign_keys", "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
	"foreign_key_list", "user_version", "defer_foreign_keys", "case_sensitive_like"}

// checkStatement refuses SQL the runtime would run for a worker and that must not run with
// the runtime's rights: more than one statement (each execute is one), ATTACH (another file,
// another worker's), DETACH, VACUUM (VACUUM INTO writes a file anywhere), a pragma that is
// not in safePragmas, as a statement or a pragma_ function, and load_extension. It reads
// SQLite's tokens: quoted strings and comments are skipped, quoted identifiers compared.
func checkStatement(sql string) error {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrStatement, fmt.Sprintf(format, args...))
	}
	statements, first, afterPragma := 0, true, false
	for tok := range tokens(sql) {
		if tok == ";" {
			first, afterPragma = true, false
			continue
		}
		word := strings.ToLower(tok)
		if first {
			if statements++; statements > 1 {
				return refuse("one statement per execute: send each of them as its own")
			}
			first = false
			switch word {
			case "attach", "detach":
				return refuse("%s: a worker's database is its one file", strings.ToUpper(word))
			case "vacuum":
				return refuse("VACUUM runs no statement of a worker (VACUUM INTO would write outside its database)")
			case "pragma":
				afterPragma = true
				continue
			}
		}
		if afterPragma {
			if word == "main" || word == "." { // the schema's name before the pragma's
				continue
			}
			if !slices.Contains(safePragmas, word) {
				return refuse("PRAGMA %s: a worker may run only these pragmas: %s", tok, strings.Join(safePragmas, ", "))
			}
			afterPragma = false
			continue
		}
		if name, ok := strings.CutPrefix(word, "pragma_"); ok && !slices.Contains(safePragmas, name) {
			return refuse("%s: a worker may read only these pragmas: %s", tok, strings.Join(safePragmas, ", "))
		}
		if word == "load_extension" {
			return refuse("load_extension: a worker's database loads no extension")
		}
	}
	return nil
}

// tokens yields the words, quoted identifiers (unquoted), numbers and punctuation of sql,
// skipping whitespace, comments and string literals.
func tokens(sql string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for i := 0; i < len(sql); {
			c := sql[i]
			switch {
			case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
				i++
			case strings.HasPrefix(sql[i:], "--"):
				if end := strings.IndexByte(sql[i:], '\n'); end >= 0 {
					i += end + 1
				} else {
					i = len(sql)
				}
			case strings.HasPrefix(sql[i:], "/*"):
				if end := strings.Index(sql[i+2:], "*/"); end >= 0 {
					i += end + 4
				} else {
					i = len(sql)
				}
			case c == '\'' || c == '"' || c == '`' || c == '[':
				closer := c
				if c == '[' {
					closer = ']'
				}
				j := i + 1
				var b strings.Builder
				for j < len(sql) {
					if sql[j] == closer {
						if closer != ']' && j+1 < len(sql) && sql[j+1] == closer { // a doubled quote
							b.WriteByte(closer)
							j += 2
							continue
						}
						break
					}
					b.WriteByte(sql[j])
					j++
				}
				i = j + 1
				if c != '\'' && !yield(b.String()) { // a string literal is data, an identifier a name
					return
				}
			case isWord(c):
				j := i
				for j < len(sql) && isWord(sql[j]) {
					j++
				}
				if !yield(sql[i:j]) {
					return
				}
				i = j
			default:
				if !yield(sql[i : i+1]) {
					return
				}
				i++
			}
		}
	}
}

// isWord tells the bytes of SQLite's unquoted identifiers and numbers (any byte past ASCII
// counts as a letter, as SQLite's tokenizer has it).
func isWord(c byte) bool {
	return c == '_' || c == '$' || c >= 0x80 || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
