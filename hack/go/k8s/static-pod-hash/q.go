package main

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/dump"
)

func quantities(args []string) {
	for _, a := range args {
		var q resource.Quantity
		if err := json.Unmarshal([]byte(a), &q); err != nil {
			fmt.Printf("%s\tERR %v\n", a, err)
			continue
		}
		fmt.Printf("%s\t%s\n", a, dump.ForHash(q))
	}
}
