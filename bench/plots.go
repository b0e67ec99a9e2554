package main

func writePlots(r *results, dir string) error { return nil }
