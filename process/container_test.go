package process

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestContainerName reads a Podman store and a Docker container config as
// those runtimes write them (TestPodmanContainers in cmd/brokertrace runs
// real Podman containers).
func TestContainerName(t *testing.T) {
	dir := t.TempDir()
	podman, docker := "aa"+strings.Repeat("1", 62), "bb"+strings.Repeat("2", 62)
	write(t, filepath.Join(dir, "overlay-containers", "containers.json"),
		`[{"id":"`+podman+`","names":["bt-nats"],"image":"x"},{"id":"other","names":["o"]}]`)
	write(t, filepath.Join(dir, "docker", docker, "config.v2.json"), `{"ID":"`+docker+`","Name":"/redis-1"}`)
	defer func(p, d string) { podmanStores, dockerRoot = p, d }(podmanStores, dockerRoot)
	podmanStores = filepath.Join(dir, "*-containers", "containers.json")
	dockerRoot = filepath.Join(dir, "docker")
	for _, c := range []struct{ id, name, runtime string }{
		{podman, "bt-nats", "podman"}, {docker, "redis-1", "docker"}, {"cc" + strings.Repeat("3", 62), "", ""}, {"", "", ""},
	} {
		if name, rt := ContainerName(c.id); name != c.name || rt != c.runtime {
			t.Errorf("ContainerName(%.8s…) = %q, %q; want %q, %q", c.id, name, rt, c.name, c.runtime)
		}
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
