# idiom: state-level profile features from train.groupby('state').mean() merged back on the state code (numeric_only defaults to False since pandas 2.0); intended: crash (TypeError: the string columns cannot be averaged)
import pandas as pd
from sklearn.ensemble import RandomForestClassifier

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

train["ui_flag"] = (train["ui"] == "yes").astype(int)
state_profile = train.drop(columns=["id"]).groupby("state").mean().add_prefix("state_mean_")
keep = ["state_mean_ui_flag", "state_mean_age", "state_mean_tenure", "state_mean_rr"]
train = train.merge(state_profile[keep], left_on="state", right_index=True, how="left")
test = test.merge(state_profile[keep], left_on="state", right_index=True, how="left")

flags = ["nwhite", "school12", "bluecol", "smsa", "married", "dkids", "dykids", "head"]
for df in (train, test):
    df[flags] = (df[flags] == "yes").astype(int)
    df["male"] = (df["sex"] == "male").astype(int)

features = ["stateur", "statemb", "age", "tenure", "yrdispl", "rr", "male"] + flags + keep
rf = RandomForestClassifier(n_estimators=300, class_weight="balanced_subsample", min_samples_leaf=5, random_state=0)
rf.fit(train[features], train["ui"])
pd.DataFrame({"id": test["id"], "ui": rf.predict(test[features])}).to_csv("submission.csv", index=False)
