package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// client is one keep-alive HTTP/1.1 connection that writes prebuilt requests and parses the
// answers with net/http. It costs a fraction of the CPU of an http.Client round trip, which
// matters when the generator shares two cores with the server and PostgreSQL.
type client struct {
	addr string
	conn net.Conn
	br   *bufio.Reader
}

const ioTimeout = 30 * time.Second

func newClient(addr string) *client { return &client{addr: addr} }

// do sends one request and returns the status of its answer, whose body it reads and
// discards. The connection is reopened when the server closes it.
func (c *client) do(req []byte) (int, error) {
	if c.conn == nil {
		conn, err := net.Dial("tcp", c.addr)
		if err != nil {
			return 0, fmt.Errorf("dial %s: %w", c.addr, err)
		}
		c.conn, c.br = conn, bufio.NewReaderSize(conn, 4096)
	}
	_ = c.conn.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := c.conn.Write(req); err != nil {
		c.close()
		return 0, fmt.Errorf("write request: %w", err)
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		c.close()
		return 0, fmt.Errorf("read answer: %w", err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.Close {
		c.close()
	}
	if err != nil {
		return 0, fmt.Errorf("read answer body: %w", err)
	}
	return resp.StatusCode, nil
}

func (c *client) close() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn, c.br = nil, nil
	}
}

// appendRequest appends the n-th POST /api/notifications of run runID to b.
func (o options) appendRequest(b []byte, runID string, n int64) []byte {
	var body [512]byte
	j := append(body[:0], `{"userId":`...)
	j = strconv.AppendInt(j, n%o.users+1, 10)
	j = append(j, `,"template":`...)
	j = strconv.AppendQuote(j, o.template)
	j = append(j, `,"priority":`...)
	j = strconv.AppendQuote(j, o.priority)
	j = append(j, `,"channels":["SMS","EMAIL"],"payload":{"code":"`...)
	code := n % 1000000
	for d := int64(100000); d > 0; d /= 10 {
		j = append(j, byte('0'+code/d%10))
	}
	j = append(j, `"}`...)
	if o.to {
		j = append(j, `,"to":{"phone":"+15550000000","email":"bench@example.com"}`...)
	}
	j = append(j, '}')

	b = append(b, "POST "...)
	b = append(b, o.url.Path...)
	b = append(b, "/api/notifications HTTP/1.1\r\nHost: "...)
	b = append(b, o.url.Host...)
	b = append(b, "\r\nAuthorization: Bearer "...)
	b = append(b, o.key...)
	b = append(b, "\r\nContent-Type: application/json\r\nIdempotency-Key: bench-"...)
	b = append(b, runID...)
	b = append(b, '-')
	b = strconv.AppendInt(b, n, 10)
	b = append(b, "\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(j)), 10)
	b = append(b, "\r\n\r\n"...)
	return append(b, j...)
}

// putTemplate creates (or replaces) the template the requests name.
func putTemplate(base, key, name string) error {
	body := `{"category":"bench","channels":["SMS","EMAIL","PUSH","WEBHOOK"],"content":{` +
		`"SMS":{"default":{"text":"Your code is {{.code}}"}},` +
		`"EMAIL":{"default":{"subject":"Your code","text":"Your code is {{.code}}"}},` +
		`"PUSH":{"default":{"title":"Your code","body":"{{.code}}"}}}}`
	req, err := http.NewRequest(http.MethodPut, base+"/api/templates/"+name, bytes.NewBufferString(body))
	if err != nil {
		return fmt.Errorf("put template %s: %w", name, err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	c := &http.Client{Timeout: ioTimeout}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("put template %s: %w", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("put template %s: %s: %s", name, resp.Status, b)
	}
	return nil
}
