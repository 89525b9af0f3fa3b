package executor

import (
	"encoding/xml"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/hpcq/hpcq/pkg/queue"
)

// A worker learns its GPUs from three nvidia-smi reports (detectScript):
// --query-gpu (index, model, memory, compute capability: one CSV line per
// GPU), -L (each GPU's UUID and its MIG instances' UUIDs, which
// CUDA_VISIBLE_DEVICES names) and -q -x (the driver and CUDA versions, the
// architecture, the compute mode, each MIG instance's memory and
// multiprocessors). Each adds to what the others said; a report missing
// (an old driver, no permission) leaves its fields empty.

// parseGPUQuery reads --query-gpu=index,name,memory.total,compute_cap.
func parseGPUQuery(lines []string) []queue.GPUDevice {
	var out []queue.GPUDevice
	for _, l := range lines {
		f := strings.Split(l, ",")
		if len(f) < 4 {
			continue
		}
		idx := strings.TrimSpace(f[0])
		if n, err := strconv.Atoi(idx); err != nil || n < 0 || strconv.Itoa(n) != idx {
			continue // not a GPU's line: nvidia-smi numbers them 0, 1, ...
		}
		mem, _ := strconv.Atoi(strings.TrimSpace(f[2]))
		out = append(out, queue.GPUDevice{Index: idx, Name: strings.TrimSpace(f[1]),
			MemoryMB: mem, ComputeCapability: strings.TrimSpace(f[3])})
	}
	sort.SliceStable(out, func(i, j int) bool { return gpuIndex(out[i]) < gpuIndex(out[j]) })
	return out
}

// gpuIndex is a GPU's index as a number (2 before 10).
func gpuIndex(g queue.GPUDevice) int {
	n, _ := strconv.Atoi(g.Index)
	return n
}

var (
	gpuLineRe = regexp.MustCompile(`^GPU (\d+): .*\(UUID: (GPU-[0-9a-fA-F-]+)\)`)
	migLineRe = regexp.MustCompile(`^\s*MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[0-9a-fA-F/-]+)\)`)
)

// parseGPUList reads `nvidia-smi -L`: each GPU by index, with its UUID and
// the MIG instances listed under it.
func parseGPUList(lines []string) map[string]queue.GPUDevice {
	out := map[string]queue.GPUDevice{}
	cur := ""
	for _, l := range lines {
		if m := gpuLineRe.FindStringSubmatch(l); m != nil {
			cur = m[1]
			out[cur] = queue.GPUDevice{Index: cur, UUID: m[2]}
			continue
		}
		if m := migLineRe.FindStringSubmatch(l); m != nil && cur != "" {
			g := out[cur]
			n, _ := strconv.Atoi(m[2])
			g.MIG = append(g.MIG, queue.MIGDevice{Profile: m[1], Device: n, UUID: m[3]})
			out[cur] = g
		}
	}
	return out
}

// smiLog is what hpcq reads of `nvidia-smi -q -x` (nvsmi_device_v12.dtd).
type smiLog struct {
	Driver string   `xml:"driver_version"`
	CUDA   string   `xml:"cuda_version"`
	GPUs   []smiGPU `xml:"gpu"`
}

type smiGPU struct {
	Name        string   `xml:"product_name"`
	Arch        string   `xml:"product_architecture"`
	UUID        string   `xml:"uuid"`
	MemoryTotal string   `xml:"fb_memory_usage>total"`
	MIGMode     string   `xml:"mig_mode>current_mig"`
	MIG         []smiMIG `xml:"mig_devices>mig_device"`
	ComputeMode string   `xml:"compute_mode"`
}

type smiMIG struct {
	Index       int    `xml:"index"`
	GPUInstance int    `xml:"gpu_instance_id"`
	CInstance   int    `xml:"compute_instance_id"`
	SMs         int    `xml:"device_attributes>shared>multiprocessor_count"`
	MemoryTotal string `xml:"fb_memory_usage>total"`
}

// parseSMIXML reads `nvidia-smi -q -x`. The decoder reads the DOCTYPE as a
// directive and resolves no entity.
func parseSMIXML(data string) (smiLog, error) {
	var l smiLog
	if err := xml.Unmarshal([]byte(data), &l); err != nil {
		return smiLog{}, fmt.Errorf("nvidia-smi -q -x: %w", err)
	}
	return l, nil
}

// mib reads "143771 MiB" as 143771; 0 when it is not a number ("N/A").
func mib(s string) int {
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "MiB")))
	if err != nil {
		return 0
	}
	return n
}

// mergeGPUs puts together the three reports: the query's GPUs, each given
// its UUID and MIG instances from -L (by index) and the rest from -q -x (by
// UUID, else by position: -q -x lists them in index order). With no query
// (its compute_cap field is newer than some drivers) the GPUs are those
// -q -x lists.
func mergeGPUs(query []queue.GPUDevice, listed map[string]queue.GPUDevice, smi smiLog) []queue.GPUDevice {
	gpus := query
	if len(gpus) == 0 {
		for i, g := range smi.GPUs {
			gpus = append(gpus, queue.GPUDevice{Index: strconv.Itoa(i), Name: g.Name, MemoryMB: mib(g.MemoryTotal)})
		}
	}
	for i := range gpus {
		g := &gpus[i]
		if l, ok := listed[g.Index]; ok {
			g.UUID, g.MIG = l.UUID, l.MIG
		}
		var x *smiGPU
		for j := range smi.GPUs {
			if smi.GPUs[j].UUID != "" && smi.GPUs[j].UUID == g.UUID {
				x = &smi.GPUs[j]
			}
		}
		if n, err := strconv.Atoi(g.Index); x == nil && g.UUID == "" && err == nil && n < len(smi.GPUs) {
			x = &smi.GPUs[n]
		}
		if x == nil {
			continue
		}
		g.Driver, g.CUDA, g.Architecture, g.ComputeMode = smi.Driver, smi.CUDA, x.Arch, x.ComputeMode
		if g.UUID == "" {
			g.UUID = x.UUID
		}
		g.MIGEnabled = strings.EqualFold(x.MIGMode, "Enabled")
		for k := range g.MIG {
			for _, m := range x.MIG {
				if m.Index == g.MIG[k].Device {
					g.MIG[k].MemoryMB, g.MIG[k].SMs = mib(m.MemoryTotal), m.SMs
					g.MIG[k].GPUInstance, g.MIG[k].ComputeInstance = m.GPUInstance, m.CInstance
				}
			}
		}
	}
	return gpus
}
