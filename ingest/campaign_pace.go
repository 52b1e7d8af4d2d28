package ingest

import "github.com/heraldhq/herald/internal/pace"

// pacer spaces the expander's lots to ExpanderConfig.Rate: the shared lot pacer, which the
// re-drive executor uses as well.
type pacer = pace.Pacer
