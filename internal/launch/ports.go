package launch

import (
	"fmt"
	"net"
)

// FreePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func FreePort() (int, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// FreePorts returns n distinct TCP ports that were free on 127.0.0.1 a
// moment ago. They are held open together while they are picked, so that
// the kernel cannot hand out one port twice.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("launch: finding a free port: %w", err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
