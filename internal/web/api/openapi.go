package api

import (
	_ "embed"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"
)

// openAPISource is the OpenAPI 3.1 document of the API. TestOpenAPICoversRoutes
// keeps it in step with the routes.
//
//go:embed openapi.json
var openAPISource []byte

// openAPIDocument is the document with info.version set to version.
func openAPIDocument(version string) []byte {
	if version == "" {
		return openAPISource
	}
	var doc map[string]any
	if err := json.Unmarshal(openAPISource, &doc); err != nil {
		return openAPISource // the test catches a broken document
	}
	if info, ok := doc["info"].(map[string]any); ok {
		info["version"] = version
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return openAPISource
	}
	return b
}

// openAPI: GET /api/v1/openapi.json.
func (h *Handler) openAPI(c echo.Context) error {
	return c.JSONBlob(http.StatusOK, h.openapi)
}
