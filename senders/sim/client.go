package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// FetchRecords returns every record of a running simulator's control endpoint at baseURL
// (`herald sim` prints it), oldest first, reading `GET /records` page by page. It fails if
// the simulator dropped records (it keeps a bounded number), since a count from an
// incomplete list would be wrong.
func FetchRecords(ctx context.Context, baseURL string) ([]Record, error) {
	var all []Record
	var since int64
	for {
		var page struct {
			Records []Record `json:"records"`
			Next    int64    `json:"next"`
			Dropped int64    `json:"dropped"`
		}
		url := fmt.Sprintf("%s/records?since=%d&limit=10000", baseURL, since)
		if err := getJSON(ctx, url, &page); err != nil {
			return nil, err
		}
		if page.Dropped > 0 {
			return nil, fmt.Errorf("simulator records: %d dropped", page.Dropped)
		}
		if len(page.Records) == 0 {
			return all, nil
		}
		all = append(all, page.Records...)
		since = page.Next
	}
}

func getJSON(ctx context.Context, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}
