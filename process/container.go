package process

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Where container runtimes keep the names of their containers, read-only:
// Podman's (rootful) container store, one containers.json per storage
// driver, and Docker's per-container config. A var so that tests can point
// them elsewhere.
var (
	podmanStores = "/var/lib/containers/storage/*-containers/containers.json"
	dockerRoot   = "/var/lib/docker/containers"
)

// ContainerName returns the name the runtime that started container id
// gave it ("bt-nats"), and which runtime that was ("podman", "docker"); ""
// when neither knows the id (Kubernetes names pods through its API, not
// files; a rootless runtime keeps its store in the user's home).
func ContainerName(id string) (name, runtime string) {
	if id == "" {
		return "", ""
	}
	if n := podmanName(id); n != "" {
		return n, "podman"
	}
	if n := dockerName(id); n != "" {
		return n, "docker"
	}
	return "", ""
}

// podmanContainer is an entry of a Podman store's containers.json.
type podmanContainer struct {
	ID    string   `json:"id"`
	Names []string `json:"names"`
}

func podmanName(id string) string {
	stores, _ := filepath.Glob(podmanStores)
	for _, path := range stores {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var cs []podmanContainer
		if json.Unmarshal(b, &cs) != nil {
			continue
		}
		i := slices.IndexFunc(cs, func(c podmanContainer) bool { return c.ID == id })
		if i >= 0 && len(cs[i].Names) > 0 {
			return cs[i].Names[0]
		}
	}
	return ""
}

func dockerName(id string) string {
	b, err := os.ReadFile(filepath.Join(dockerRoot, id, "config.v2.json"))
	if err != nil {
		return ""
	}
	var c struct{ Name string }
	if json.Unmarshal(b, &c) != nil {
		return ""
	}
	return strings.TrimPrefix(c.Name, "/")
}
