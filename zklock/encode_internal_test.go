package zklock

import (
	"reflect"
	"testing"
)

// TestEncodeRoundTrip: a node's data, written by hand for a plain
// holding or waiter and by encoding/json for a re-entrant lease's, reads
// back as it was, and a Meta map changed between calls is encoded anew.
func TestEncodeRoundTrip(t *testing.T) {
	meta := map[string]string{"host": "h\"1\n", "pid": "42", "ünï": "\u2028"}
	for _, d := range []nodeData{
		{Span: 1},
		{Span: 10000, Held: true, Since: 1700000000000, Meta: meta},
		{Span: 3000, Limit: 5, Meta: meta},
		{Span: 7, Held: true, Holds: map[string]int64{"a": 7}, Waits: map[string]int64{"b": 3}, Meta: meta},
		{Span: 5, Meta: map[string]string{}},
	} {
		got := decodeData(d.encode())
		if len(d.Meta) == 0 {
			d.Meta = nil
		}
		if !reflect.DeepEqual(got, d) {
			t.Errorf("decode(encode(%+v)) = %+v", d, got)
		}
	}
	m := map[string]string{"k": "v1"}
	_ = nodeData{Span: 1, Meta: m}.encode()
	other := map[string]string{"k": "v2"}
	if got := decodeData(nodeData{Span: 1, Meta: other}.encode()); got.Meta["k"] != "v2" {
		t.Errorf("another map encoded as %v", got.Meta)
	}
}
