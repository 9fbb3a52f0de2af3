// The lockstream-fencing-token header: how a call made inside a held lock carries the lock's
// fencing token to the resource it writes to, so that the resource can refuse a holder whose
// lock was lost (the TypeScript SDK's lockstream/fencing checks it on the resource's side).

package lockstream

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/metadata"
)

// FencingHeader is the gRPC metadata key and HTTP header that carry a fenced call's token, as
// "<lock name, percent-encoded as JavaScript's encodeURIComponent does>:<token in decimal>".
const FencingHeader = "lockstream-fencing-token"

// FormatFencingToken is the FencingHeader value for the lock named name held with token.
func FormatFencingToken(name string, token uint64) string {
	return encodeURIComponent(name) + ":" + strconv.FormatUint(token, 10)
}

// ParseFencingToken reads a FencingHeader value back into the lock's name and token; an error
// matching ErrInvalidArgument says what is malformed.
func ParseFencingToken(value string) (name string, token uint64, err error) {
	colon := strings.LastIndexByte(value, ':')
	if colon < 0 {
		return "", 0, fencingValueError(value, "no ':' between the lock name and the token")
	}
	token, err = strconv.ParseUint(value[colon+1:], 10, 64)
	if err != nil || value[colon+1:] == "" || strings.HasPrefix(value[colon+1:], "+") {
		return "", 0, fencingValueError(value, "the token is not a decimal uint64")
	}
	for _, c := range []byte(value[:colon]) {
		if c < 0x21 || c > 0x7e {
			return "", 0, fencingValueError(value, "the lock name has a character unencoded (percent-encode the name as UTF-8)")
		}
	}
	name, err = decodeURIComponent(value[:colon])
	if err != nil || name == "" {
		return "", 0, fencingValueError(value, "the lock name is empty or not percent-encoded UTF-8")
	}
	return name, token, nil
}

// WithFencingToken returns ctx with the lock's fencing token added to the outgoing gRPC metadata
// of every call made with it.
func WithFencingToken(ctx context.Context, name string, token uint64) context.Context {
	return metadata.AppendToOutgoingContext(ctx, FencingHeader, FormatFencingToken(name, token))
}

// SetFencingToken sets the FencingHeader of an HTTP request to the lock's fencing token.
func SetFencingToken(header http.Header, name string, token uint64) {
	header.Set(FencingHeader, FormatFencingToken(name, token))
}

func fencingValueError(value, reason string) error {
	return fmt.Errorf("%w: %s %q: %s", ErrInvalidArgument, FencingHeader, value, reason)
}

// encodeURIComponent escapes every byte of s's UTF-8 but ASCII letters, digits and -_.!~*'(),
// as JavaScript's encodeURIComponent does, so that every client makes the same header value.
func encodeURIComponent(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.!~*'()", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// decodeURIComponent undoes encodeURIComponent (any %XX, '+' left as a plus sign); the result
// must be UTF-8.
func decodeURIComponent(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("a %% without two hex digits")
		}
		n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("a %% without two hex digits")
		}
		b.WriteByte(byte(n))
		i += 2
	}
	decoded := b.String()
	if !utf8.ValidString(decoded) {
		return "", fmt.Errorf("not UTF-8")
	}
	return decoded, nil
}
