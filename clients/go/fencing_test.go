package lockstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
	"testing"

	"google.golang.org/grpc/metadata"
)

// The header values every client makes of the same locks (test/fixtures/fencing-headers.json,
// made with JavaScript's encodeURIComponent): made and parsed the same here.
func TestFencingTokenAgreesWithEveryClient(t *testing.T) {
	raw, err := os.ReadFile("../../test/fixtures/fencing-headers.json")
	if err != nil {
		t.Fatal(err)
	}
	var fixture struct {
		Header string
		Cases  []struct{ Name, Token, Value string }
	}
	if err := json.Unmarshal(raw, &fixture); err != nil {
		t.Fatal(err)
	}
	if fixture.Header != FencingHeader {
		t.Fatalf("header %q, want %q", FencingHeader, fixture.Header)
	}
	for _, c := range fixture.Cases {
		token, _ := strconv.ParseUint(c.Token, 10, 64)
		if got := FormatFencingToken(c.Name, token); got != c.Value {
			t.Errorf("FormatFencingToken(%q, %d) = %q, want %q", c.Name, token, got, c.Value)
		}
		name, parsed, err := ParseFencingToken(c.Value)
		if err != nil || name != c.Name || parsed != token {
			t.Errorf("ParseFencingToken(%q) = %q, %d, %v", c.Value, name, parsed, err)
		}
	}
}

func TestParseFencingTokenRefusesMalformedValues(t *testing.T) {
	for _, value := range []string{"", "orders", "orders:", ":7", "orders:-1", "orders:+7", "orders:18446744073709551616", "orders:7x", "%zz:7", "%ff:7", "a b:7", "café:7"} {
		if _, _, err := ParseFencingToken(value); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ParseFencingToken(%q): %v, want ErrInvalidArgument", value, err)
		}
	}
}

func TestFencingTokenRidesGRPCMetadataAndHTTPHeaders(t *testing.T) {
	ctx := WithFencingToken(context.Background(), "orders/42", 7)
	md, _ := metadata.FromOutgoingContext(ctx)
	if got := md.Get(FencingHeader); len(got) != 1 || got[0] != "orders%2F42:7" {
		t.Fatalf("metadata %v", got)
	}
	header := http.Header{}
	SetFencingToken(header, "orders/42", 7)
	if got := header.Get(FencingHeader); got != "orders%2F42:7" {
		t.Fatalf("header %q", got)
	}
}
