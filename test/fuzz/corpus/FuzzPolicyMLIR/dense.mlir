#condensate.dense
