package main

import "os/exec"

func newSession(*exec.Cmd) {}
