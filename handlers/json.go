package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"io"
	"net/http"
)

// maxJSONBody bounds JSON request bodies.
const maxJSONBody = 64 << 10

// decodeJSON reads a JSON request body into v, refusing bodies over maxJSONBody, unknown
// fields, wrong types and trailing data with the error envelope.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxJSONBody)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("data after the JSON value")
		}
	}
	var tooLarge *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tooLarge):
		return envelope.Errorf(http.StatusRequestEntityTooLarge, envelope.CodePayloadTooLarge, "the request body is larger than the limit of %d KiB", maxJSONBody>>10)
	case errors.Is(err, io.EOF):
		return envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, "the request body is empty; send a JSON object")
	case errors.As(err, &typeErr):
		return envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, "field %q must be %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()))
	}
	return envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, "the request body is not valid JSON: %v", err)
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	case "bool":
		return "true or false"
	}
	return fmt.Sprintf("a %s", goKind)
}
